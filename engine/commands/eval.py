"""``kgengine eval``: answer a question set with a ``kgengine ask`` method under one or more
settings (graphs, hop counts, top-k, seeds) and report BRINK's strict metrics and MetaQA
Hit@1; ``kgengine eval score`` scores any gold/pred pair in the official formats."""

from __future__ import annotations

import json
from pathlib import Path

import click
from kgengine.cli_common import connect, labels_option, show_progress, store_option
from kgengine.errors import InvalidParameterError, KGEngineError
from kgengine.eval.files import score_files
from kgengine.eval.metrics import METRIC_KEYS
from kgengine.rag.methods import check_methods
from kgengine.surface import Surface, parse_surface


def check_build_labels(question_specs: tuple[str, ...], labels: str | None) -> None:
    """Refuse ``--labels text`` for a BRINK build whose entities have no text label (Family's
    have none): re-expressed, every entity would silently keep its id."""
    if labels is None or parse_surface(labels) != Surface.TEXT:
        return
    from kgengine.eval.surface import read_entities

    for spec in question_specs:
        entities = Path(spec) / "entities.tsv"
        if entities.is_file() and not any(e.label for e in read_entities(entities)):
            raise InvalidParameterError(f"--labels text: the BRINK build {spec} has no text labels (its "
                                        "entities.tsv has ids only); use --labels dataset or private")


def _print_scores(scores: dict[str, float | int], missing: int, label: str) -> None:
    click.echo(f"{label} (n = {scores['n']}, {missing} without a prediction)")
    for key in METRIC_KEYS[:-1]:
        click.echo(f"  {key:<10} {scores[key]:.4f}")


@click.group("eval", invoke_without_command=True, context_settings={"show_default": True})
@click.option("--questions", "question_specs", multiple=True, metavar="SET",
              help="metaqa-1hop|metaqa-2hop|metaqa-3hop[:split], a `kgengine brink build` directory, "
              "a BRINK-schema .jsonl, an official BRINK .tsv or a MetaQA qa_*.txt (repeatable).")
@click.option("--split", default=None, help="Split of a BRINK build or MetaQA name [default: test].")
@click.option("--method", "methods", multiple=True, metavar="METHOD",
              help="A `kgengine ask` method (repeatable or comma-separated) [default: offline].")
@click.option("--graph", "graph_specs", multiple=True, metavar="[NAME=]GRAPH",
              help="Graph setting, e.g. --graph complete=G1 --graph incomplete=G2 [default: a BRINK "
              "build's own KGs (loaded as DIR-complete/DIR-incomplete), else the store's only graph].")
@click.option("--hops", default=None, metavar="LIST", help="Retrieval hops to sweep, e.g. 1,2,3.")
@click.option("--top-k", default=None, metavar="LIST", help="Top-K triples to sweep, e.g. 10,20,30.")
@click.option("--train", "train_path", default=None, type=click.Path(exists=True, path_type=Path),
              help="Training questions for the answerer [default: MetaQA dev of the same hops; a BRINK "
              "build's train split].")
@click.option("--sample", default=None, type=click.IntRange(min=1), help="Questions per seeded sample.")
@click.option("--seeds", default=None, metavar="A-B",
              help="Sample seeds, e.g. 0-7 [default with --sample: 0].")
@click.option("--heldout-share", default=None, type=float,
              help="MetaQA held-out patterns: this seeded share of question patterns is removed from "
              "the training questions, and only test questions of those patterns are scored.")
@click.option("--heldout-seed", default=0, type=int, help="Seed choosing the held-out patterns.")
@click.option("--heldout-by", type=click.Choice(["pattern", "qtype"]), default="pattern", show_default=True,
              help="What is held out: question text patterns (the topic mention replaced), or whole "
              "MetaQA question types (relation paths never seen in learning: harder).")
@click.option("--ceiling/--no-ceiling", default=True,
              help="MetaQA: report the answerable ceiling (gold answer within the hop count in the KB).")
@labels_option
@click.option("--option", "extra_options", multiple=True, metavar="KEY=VALUE",
              help="A shared answerer setting or an option of a method run (`kgengine ask --help` lists "
              "each method's), e.g. --option embedding_model=NAME --option min_score=0.6.")
@click.option("--sweep", "sweeps", multiple=True, metavar="KEY=V1,V2",
              help="Sweep a method option like --hops, e.g. --sweep beam_width=1,2,3 (repeatable).")
@click.option("--llm-concurrency", type=click.IntRange(min=1), default=1, show_default=True,
              help="Questions answered at once, and LLM requests in flight (for a server that batches: "
              "vLLM, a llama.cpp server with several slots).")
@click.option("--split-on-spaces", is_flag=True, help="Score with the official --split-on-spaces.")
@click.option("--plots/--no-plots", default=True, help="Write PNG plots (the plots extra).")
@click.option("--allow-errors", is_flag=True,
              help="Exit 0 even when questions failed on a service (an LLM endpoint down or too slow); "
              "they are scored as misses either way (a question that cannot be answered is a miss).")
@click.option("-o", "--output", "out_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Output directory (results.jsonl, summary.json, summary.md, plots); a rerun resumes.")
@store_option
@click.pass_context
def eval_group(ctx: click.Context, question_specs: tuple[str, ...], split: str | None,
               methods: tuple[str, ...], graph_specs: tuple[str, ...], hops: str | None, top_k: str | None,
               train_path: Path | None, sample: int | None, seeds: str | None, heldout_share: float | None,
               heldout_seed: int, heldout_by: str, ceiling: bool, labels: str | None,
               extra_options: tuple[str, ...], sweeps: tuple[str, ...], llm_concurrency: int,
               split_on_spaces: bool, plots: bool, allow_errors: bool, out_dir: Path | None,
               store_location: str | None) -> None:
    """Evaluate `kgengine ask` methods on question sets: strict BRINK metrics (the official
    evaluator's semantics), MetaQA Hit@1, complete vs incomplete KGs, seeded samples, sweeps.

    \b
    kgengine eval --questions BUILD_DIR --method offline -o OUT
    kgengine eval --questions metaqa-2hop --graph metaqa --sample 500 --seeds 0-7 -o OUT
    kgengine eval score --gold gold.json --pred pred.json --json"""
    if ctx.invoked_subcommand is not None:
        return
    if not question_specs:
        click.echo(ctx.get_help())
        return
    if out_dir is None:
        raise click.UsageError("-o/--output is required")
    check_build_labels(question_specs, labels)
    from kgengine.eval.run import EvalRequest, run_eval

    request = EvalRequest(
        question_specs=question_specs, split=split,
        methods=tuple(m.strip() for v in (methods or ("offline",)) for m in v.split(",") if m.strip()),
        graph_specs=graph_specs, hops=hops, top_k=top_k, train=train_path, sample=sample, seeds=seeds,
        heldout_share=heldout_share, heldout_seed=heldout_seed, heldout_by=heldout_by, ceiling=ceiling,
        labels=labels,
        extra_options=extra_options, sweeps=sweeps, llm_concurrency=llm_concurrency,
        split_on_spaces=split_on_spaces, plots=plots,
        out_dir=out_dir,
    )
    check_methods(request.methods)
    # with explicit graphs nothing is loaded: read-only, so several runs can share a store
    with connect(store_location, read_only=bool(graph_specs)) as store:
        summary = run_eval(store, request, progress=show_progress(), log=lambda m: click.echo(m, err=True))
    click.echo((out_dir / "summary.md").read_text(encoding="utf-8"), nl=False)
    click.echo(f"reports in {out_dir} ({len(summary['settings'])} settings)", err=True)
    failed = {key: s.get("service_errors") or 0 for key, s in summary["settings"].items()}
    if any(failed.values()) and not allow_errors:
        worst = ", ".join(f"{key}: {n}" for key, n in failed.items() if n)
        raise KGEngineError(f"{sum(failed.values())} question(s) failed on a service (the LLM endpoint: "
                            f"{worst}); their error records "
                            f"are in {out_dir / 'results.jsonl'} and a rerun asks them again; "
                            "--allow-errors accepts them as misses")


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@eval_group.command("score")
@click.option("--gold", "gold_path", required=True, type=_FILE,
              help="Gold JSON list of {id, question, answers, hard_answer} (official format).")
@click.option("--pred", "pred_path", required=True, type=_FILE,
              help="Prediction JSON list of {id, raw_output} (official format).")
@click.option("--split-on-spaces", is_flag=True, help="Also split raw outputs on spaces and tabs.")
@click.option("--permissive", is_flag=True,
              help="Also print the permissive substring scores (BRINK App. I; not the strict metric).")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"hits_any", "precision", "recall", "f1", "hits_hard", "hhr", "n"}.')
def score_command(gold_path: Path, pred_path: Path, split_on_spaces: bool, permissive: bool,
                  as_json: bool) -> None:
    """Strict BRINK scores of a gold/pred pair, as the official evaluator computes them."""
    strict, missing = score_files(gold_path, pred_path, split_on_spaces)
    loose = score_files(gold_path, pred_path, split_on_spaces, permissive=True)[0] if permissive else None
    if as_json:
        out: dict[str, object] = dict(strict.as_dict())
        if loose is not None:
            out["permissive"] = loose.as_dict()
        click.echo(json.dumps(out))
        return
    _print_scores(strict.as_dict(), missing, "strict BRINK metrics")
    if loose is not None:
        _print_scores(loose.as_dict(), missing, "PERMISSIVE substring metrics (BRINK App. I, not strict)")
