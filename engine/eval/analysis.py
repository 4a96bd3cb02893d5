"""Why a question was missed (pure). The analysis may read the gold; the answerer never did.

Causes, checked in this order (the first that applies):

- ``topic not linked``: the answerer gave no topic entity, or another one than the question's;
- ``relation not linked``: it found no relation path and gave no answer, or its path is not
  the asked one (BRINK: the gold's relation and direction; MetaQA: the relations its question
  type names, e.g. ``movie_to_director`` = ``directed_by``);
- ``answer ranked below the cut``: a gold answer is among its ranked answers but not in what
  was scored (the raw output; for Hit@1, the top answer);
- ``KB lacks the fact``: no gold answer is within reach of the topic in the answered graph;
- ``no rule reaches the hard answer`` (BRINK): the hard answer is within reach but its
  asked fact is not in the answered graph (only a rule could find it) and the answerer
  did not find it;
- ``wrong answer``: none of the above can be told."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from kgengine.eval.metrics import QuestionFigures, gold_answer_set, normalize_answer, prediction_answers

TOPIC_NOT_LINKED = "topic not linked"
RELATION_NOT_LINKED = "relation not linked"
RANKED_BELOW_CUT = "answer ranked below the cut"
KB_LACKS_FACT = "KB lacks the fact"
NO_RULE_REACHES_HARD = "no rule reaches the hard answer"
WRONG_ANSWER = "wrong answer"
CAUSES = (TOPIC_NOT_LINKED, RELATION_NOT_LINKED, RANKED_BELOW_CUT, KB_LACKS_FACT, NO_RULE_REACHES_HARD,
          WRONG_ANSWER)


def is_miss(record: Mapping[str, Any], scores: QuestionFigures) -> bool:
    """MetaQA: Hit@1 is 0; BRINK: no gold answer or not the hard answer."""
    if scores["hit@1"] is not None:
        return scores["hit@1"] == 0.0
    return scores["hits_any"] == 0.0 or scores["hits_hard"] == 0.0


def miss_cause(record: Mapping[str, Any], *, metaqa: bool, reachable: set[str] | None,
               has_fact: bool | None) -> str:
    """The cause of one missed question. ``reachable``: entities within the hop limit of
    the topic in the answered graph; ``has_fact``: whether that graph holds the asked fact
    (topic, relation, hard answer) (None: unknown)."""
    gold = record["gold"]
    topic = record.get("topic_entity")
    if record.get("linked_topic") is None or (topic is not None and record["linked_topic"] != topic):
        return TOPIC_NOT_LINKED
    ranked = list(record.get("answers") or [])
    if not record.get("relation_path") and not ranked:
        return RELATION_NOT_LINKED
    expected = metaqa_path(gold.get("pattern")) if metaqa else asked_path(gold.get("pattern"))
    if expected is not None and record.get("relation_path") and record["relation_path"] != expected:
        return RELATION_NOT_LINKED
    labels = [x for x in record.get("answer_labels") or [] if x]
    ranked_norm = {normalize_answer(str(a)) for a in ranked + labels}
    answers = gold_answer_set(gold["answers"])
    if metaqa:
        scored = {normalize_answer(record.get("top_answer") or "")}
    else:
        scored = set(prediction_answers(record.get("raw_output", "")))
    hard = None if gold.get("hard_answer") is None else normalize_answer(str(gold["hard_answer"]))
    wanted = answers if metaqa or hard is None else answers | {hard}
    if (wanted & ranked_norm) - scored and not (metaqa and answers & scored):
        return RANKED_BELOW_CUT
    if reachable is not None:
        reach = {normalize_answer(e) for e in reachable}
        if not (answers | ({hard} if hard else set())) & reach:
            return KB_LACKS_FACT
        if not metaqa and hard and has_fact is False and hard in reach:
            return NO_RULE_REACHES_HARD
    return WRONG_ANSWER


def asked_path(pattern: str | None) -> list[str] | None:
    """A BRINK pattern ``relation/forward`` or ``relation/inverse`` as a relation path
    (``["relation"]`` or ``["^relation"]``); None when it is not one."""
    if not pattern or "/" not in pattern:
        return None
    relation, direction = pattern.rsplit("/", 1)
    if direction == "forward":
        return [relation]
    if direction == "inverse":
        return ["^" + relation]
    return None


# MetaQA's question types name entity types; a movie reaches each type by one KB relation
METAQA_RELATIONS = {"director": "directed_by", "writer": "written_by", "actor": "starred_actors",
                    "year": "release_year", "genre": "has_genre", "tag": "has_tags", "tags": "has_tags",
                    "language": "in_language", "imdbrating": "has_imdb_rating", "imdbvotes": "has_imdb_votes",
                    "rating": "has_imdb_rating", "votes": "has_imdb_votes"}


def metaqa_path(qtype: str | None) -> list[str] | None:
    """A MetaQA question type (``actor_to_movie_to_director``) as its relation path
    (``["^starred_actors", "directed_by"]``); None for a type it cannot read."""
    if not qtype:
        return None
    kinds = qtype.split("_to_")
    path = []
    for a, b in zip(kinds, kinds[1:], strict=False):
        if a == "movie" and b in METAQA_RELATIONS:
            path.append(METAQA_RELATIONS[b])
        elif b == "movie" and a in METAQA_RELATIONS:
            path.append("^" + METAQA_RELATIONS[a])
        else:
            return None
    return path or None


def cause_counts(causes: Iterable[str]) -> dict[str, int]:
    counts = Counter(causes)
    return {c: counts[c] for c in CAUSES if counts[c]}
