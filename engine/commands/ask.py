"""``kgengine ask``: answer a question (or a file of them) over a graph, with evidence."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click
from kgengine.cli_common import (
    check_graph_labels,
    connect,
    graph_option,
    labels_option,
    show_progress,
    store_option,
)
from kgengine.errors import KGEngineError
from kgengine.model import Question
from kgengine.rag.base import Answer
from kgengine.rag.methods import (
    DEFAULT_HOPS,
    DEFAULT_TOP_K,
    AnswerSettings,
    build_answerer,
    default_method,
    method_names,
    methods_help,
    parse_key_values,
    settings_with,
    split_options,
)
from kgengine.store import resolve_graph
from kgengine.surface import Surface, parse_surface


class _LazyHelpOption(click.Option):
    """An option whose help is computed when shown (the method list imports every method's
    module; ``kgengine ask QUESTION`` imports only the chosen one's)."""

    def __init__(self, *args: Any, help_text: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._help_text = help_text

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self._help_text()
        return super().get_help_record(ctx)


def _method_help() -> str:
    return ("Answering method: " + methods_help() + " [default: the LLM default when an LLM is "
            "configured, else the offline one].")


@click.command()
@click.argument("question", required=False)
@click.option("--entity", default=None,
              help="The topic entity: an id, private id or label [default: the [bracketed] mention, "
                   "else the longest entity name in the question].")
@graph_option()
@store_option
@click.option("--method", type=click.Choice(method_names()), default=None, cls=_LazyHelpOption,
              help_text=_method_help)
@click.option("--option", "method_options", multiple=True, metavar="KEY=VALUE",
              help="A setting of the chosen method (see --method for each method's keys), e.g. "
                   "--option use_rules=false; repeatable.")
@click.option("--hops", type=click.IntRange(1, 3), default=DEFAULT_HOPS, show_default=True,
              help="Most relations of a learned path (training files without a hop count; MetaQA's "
                   "N-hop folder sets it) or a zero-shot one; k-hop retrieval depth of the LLM methods.")
@click.option("--top-k", type=click.IntRange(min=1), default=DEFAULT_TOP_K, show_default=True,
              help="Triples put in front of an LLM.")
@click.option("--rules", "rules_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Rules (kgengine mine / AMIE 3 output, a BRINK rules.tsv) [default: "
                                 "mine the graph on first use with BRINK's settings, cached].")
@click.option("--train", "train", multiple=True, metavar="FILE",
              help="Training questions with gold answers (BRINK JSONL or MetaQA qa_*.txt) to learn "
                   "question pattern -> relation path from; repeatable.")
@labels_option
@click.option("--embedding-model", default=None,
              help="sentence-transformers model name or path [default: all-MiniLM-L6-v2, packaged].")
@click.option("--llm-base-url", default=None, envvar="OPENAI_BASE_URL",
              help="OpenAI-compatible endpoint [default: $OPENAI_BASE_URL].")
@click.option("--llm-model", default=None, help="LLM model name (the LLM methods).")
@click.option("--llm-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="LLM response cache directory [default: kgengine.llm's].")
@click.option("--questions", "questions_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Answer a file: BRINK-schema JSONL (id, question, topic_entity) or a "
                                 "MetaQA qa_*.txt; one JSON object per line on standard output.")
@click.option("--allow-empty", is_flag=True, help="A --questions file without questions is no error.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
def ask(question: str | None, entity: str | None, graph: str | None, store_location: str | None,
        method: str | None, method_options: tuple[str, ...], hops: int, top_k: int, rules_path: Path | None,
        train: tuple[str, ...], labels: str | None, embedding_model: str | None, llm_base_url: str | None,
        llm_model: str | None, llm_cache: Path | None, questions_path: Path | None, allow_empty: bool,
        as_json: bool) -> None:
    """Answer QUESTION over GRAPH, with the relation path, reasoning and evidence paths."""
    if (question is None) == (questions_path is None):
        raise click.UsageError("give a QUESTION or --questions FILE (not both)")
    if questions_path is not None and entity is not None:
        raise click.UsageError("--entity is for one question; a questions file names each topic")
    # an endpoint given on the command line means an LLM method is wanted (never a silent offline run)
    method = method or default_method(True if (llm_base_url or llm_model) else None)
    shared, options = split_options(method, parse_key_values(method_options))
    settings = settings_with(AnswerSettings(
        hops=hops, top_k=top_k, rules_path=rules_path, train_paths=tuple(_split_train_paths(train)),
        # as given: the answered graph's own ids
        labels=parse_surface(labels or Surface.DATASET), embedding_model=embedding_model,
        llm_base_url=llm_base_url, llm_model=llm_model, llm_cache=llm_cache), shared)
    settings.check()
    items = None
    if questions_path is not None:
        from kgengine.rag.batch import read_questions

        items = read_questions(questions_path, allow_empty=allow_empty)  # fails before anything is built
        if not items:
            click.echo(f"{questions_path} holds no questions", err=True)
            return
    store = connect(store_location, read_only=True)
    try:
        graph = resolve_graph(store, graph)  # the graph named, or the store's only one
        check_graph_labels(store, graph, settings.labels)
        with ExitStack() as resources:
            answerer = build_answerer(store, graph, method, settings, options, resources=resources,
                                      log=lambda m: click.echo(m, err=True))
            if items is not None:
                from kgengine.rag.batch import answer_all

                for record in answer_all(answerer, items, total=len(items), progress=show_progress()):
                    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
                return
            assert question is not None
            answer = answerer.answer(Question(question, entity))
    finally:
        store.close()
    if as_json:
        click.echo(json.dumps(answer.to_json(), ensure_ascii=False, indent=1))
    else:
        render(answer)


def evidence_lines(answer: Answer, index: int) -> list[str]:
    lines = []
    for e in answer.answers[index].evidence:
        path = " ∧ ".join(f"{r}({h}, {t})" for h, r, t in e.path)
        lines.append(path + (f"  ⇐ {e.rule} ({e.confidence:.2f})" if e.rule else "  (direct)"))
    return lines


def render(answer: Answer) -> None:
    """Answers, relation path, reasoning chain and evidence: rich tables on a terminal, plain
    lines otherwise (pipes and logs get every character, unwrapped)."""
    path = " / ".join(answer.relation_path or []) or "(none)"
    learned = f" ({answer.learned_from})" if answer.learned_from else ""
    header = f"topic: {answer.topic_entity}   relation path: {path}{learned}   method: {answer.method}"
    if not sys.stdout.isatty():
        click.echo(f"Q: {answer.question}")
        click.echo(header)
        click.echo("answers:" if answer.answers else "no answer found")
        for rank, a in enumerate(answer.answers):
            click.echo(f"{rank + 1:>3}. {a.id}" + (f" ({a.label})" if a.label and a.label != a.id else "")
                       + f"  score {a.score:.3f}")
            for line in evidence_lines(answer, rank):
                click.echo(f"       {line}")
        click.echo("reasoning:")
        for step in answer.reasoning:
            click.echo(f"  - {step}")
        click.echo(f"{answer.timings.get('total_ms', 0):.1f} ms")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]Q:[/bold] {answer.question}")
    console.print(header)
    if not answer.answers:
        console.print("[yellow]no answer found[/yellow]")
    else:
        table = Table("#", "answer", "label", "score", "evidence (path ⇐ rule, PCA confidence)",
                      title="answers")
        for rank, a in enumerate(answer.answers):
            table.add_row(str(rank + 1), a.id, a.label or "", f"{a.score:.3f}",
                          "\n".join(evidence_lines(answer, rank)))
        console.print(table)
    console.print("[bold]reasoning:[/bold]")
    for step in answer.reasoning:
        console.print(f"  - {step}")
    console.print(f"[dim]{answer.timings.get('total_ms', 0):.1f} ms[/dim]")


__all__ = ["ask", "KGEngineError"]


def _split_train_paths(values: Sequence[str | Path]) -> list[Path]:
    """``--train`` values; each may list several files separated by commas."""
    out: list[Path] = []
    for value in values:
        out += [Path(v) for v in str(value).split(",") if v.strip()]
    return out
