"""Prompts as files: ``kgengine/llm/prompts/NAME.txt``, loaded by name and filled with
checked placeholders.

Syntax is :meth:`str.format`'s: ``{name}`` is a placeholder, ``{{`` and ``}}`` are literal
braces. Only plain names are allowed (no ``{0}``, ``{a.b}``, ``{a[0]}``, ``{a!r}``,
``{a:>3}``), so a prompt's placeholders are exactly the names it mentions. Filling with a
missing or an unknown name is an error, never a silent blank. A file's final newline (which
editors add) is not part of the prompt."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from kgengine.errors import KGEngineError

PROMPT_PACKAGE = "kgengine.llm"
PROMPT_FOLDER = "prompts"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class PromptError(KGEngineError):
    """A prompt file that cannot be read or parsed, or a fill with wrong placeholders."""


@dataclass(frozen=True)
class Prompt:
    name: str  # file stem, or the path for a prompt read from a file of the user's
    text: str
    placeholders: frozenset[str]

    @classmethod
    def parse(cls, name: str, text: str) -> Prompt:
        names: set[str] = set()
        try:
            fields = list(string.Formatter().parse(text))
        except ValueError as exc:  # a lone "{" or "}"
            raise PromptError(f"prompt {name}: {exc} (write literal braces as {{{{ and }}}})") from exc
        for _literal, field_name, spec, conversion in fields:
            if field_name is None:
                continue
            if not _NAME.match(field_name) or spec or conversion:
                shown = "{" + field_name + (f"!{conversion}" if conversion else "") + (
                    f":{spec}" if spec else "") + "}"
                raise PromptError(f"prompt {name}: placeholder {shown} is not a plain name "
                                  "(write literal braces as {{ and }})")
            names.add(field_name)
        return cls(name, text, frozenset(names))

    def fill(self, values: Mapping[str, object] | None = None, /, **kwargs: object) -> str:
        given = {**(values or {}), **kwargs}
        missing = sorted(self.placeholders - given.keys())
        unknown = sorted(given.keys() - self.placeholders)
        if missing or unknown:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if unknown:
                parts.append("unknown " + ", ".join(unknown))
            expected = ", ".join(sorted(self.placeholders)) or "none"
            raise PromptError(f"prompt {self.name}: {'; '.join(parts)} placeholder(s) "
                              f"(it expects: {expected})")
        return self.text.format_map({k: str(v) for k, v in given.items()})


def prompt_names() -> list[str]:
    """The prompts shipped with kgengine."""
    folder = resources.files(PROMPT_PACKAGE).joinpath(PROMPT_FOLDER)
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".txt"))


def _strip_final_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


@cache
def load_prompt(name: str) -> Prompt:
    """A shipped prompt by name (``brink_question`` -> ``prompts/brink_question.txt``)."""
    if not _NAME.match(name):
        raise PromptError(f"prompt name {name!r} is not a plain name (expected e.g. 'brink_question')")
    resource = resources.files(PROMPT_PACKAGE).joinpath(PROMPT_FOLDER, f"{name}.txt")
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        shipped = ", ".join(prompt_names())
        raise PromptError(f"no prompt named {name!r} (shipped prompts: {shipped})") from None
    return Prompt.parse(name, _strip_final_newline(text))


def read_prompt(path: Path) -> Prompt:
    """A prompt from a file of the user's (same syntax as the shipped ones)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"{path}: cannot read prompt: {exc.strerror or exc}") from exc
    return Prompt.parse(str(path), _strip_final_newline(text))


def shipped(name: str) -> Any:
    """A dataclass field defaulting to the shipped prompt ``name`` (read when the instance is
    made), for the prompt sets of the answerers: ``answer: Prompt = shipped("rag_answer")``."""
    return field(default_factory=lambda: load_prompt(name))
