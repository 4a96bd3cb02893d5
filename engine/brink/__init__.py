"""BRINK benchmark construction (BRINK §3.2–3.3, App. D, H): rule-inferable triple removal,
question generation, balancing, answer-set completion, splits and the answerability check."""

from kgengine.brink.build import AnswerabilityError, BuildOptions, BuildResult, build_brink
from kgengine.brink.questions import QuestionDirection, QuestionUnit
from kgengine.brink.removal import Selection

__all__ = [
    "AnswerabilityError", "BuildOptions", "BuildResult", "QuestionDirection", "QuestionUnit",
    "Selection", "build_brink",
]
