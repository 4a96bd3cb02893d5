"""``kgengine brink build`` and ``kgengine brink stats``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
from kgengine.brink.build import OUTPUT_FILES, BuildOptions, build_brink, mine_rules, read_relation_labels
from kgengine.brink.question_writer import LLMQuestionWriter, default_cache_dir
from kgengine.brink.questions import QuestionUnit
from kgengine.brink.removal import Selection
from kgengine.brink.report import markdown
from kgengine.cli_common import check_output_dir, connect, graph_option, show_progress, store_option
from kgengine.errors import KGEngineError
from kgengine.mining.io import MinedRule, read_rules
from kgengine.store import KGStore, read_workers
from kgengine.surface import SURFACE_CHOICES, parse_surface


@click.group()
def brink() -> None:
    """BRINK benchmarks: questions whose direct triple was removed but stays inferable."""


@brink.command("build")
@store_option
@graph_option(required=True)
@click.option("--rules", "rules_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None,
              help="Rules: `kgengine mine` output, AMIE 3's stdout or a body/head rules TSV "
                   "[default: mine GRAPH now with BRINK's AMIE settings and --max-len].")
@click.option("--max-len", default=None, type=click.IntRange(min=2),
              help="Maximum rule length, head included: with --rules, longer rules are left out; "
                   "without, the mining limit [default 3] (BRINK: 3 for Family, 4 for FB15k-237 "
                   "and Wikidata5m).")
@click.option("--groundings-per-rule", default=30, show_default=True, type=click.IntRange(min=1))
@click.option("--selection", type=click.Choice([s.value for s in Selection]), default="sample",
              show_default=True,
              help="sample: a seeded uniform sample of each rule's groundings; first: the first N "
                   "in the query's order (by entity id).")
@click.option("--max-candidates", default=200_000, show_default=True, type=click.IntRange(min=1),
              help="Per rule, the most groundings held to sample from; a rule with more samples "
                   "from the first ones in query order (reported in rules.tsv and stats).")
@click.option("--max-rules", default=None, type=click.IntRange(min=1),
              help="Ground only N rules, drawn at random (seeded) among those with groundings, as "
                   "the official code does (grounding_sample.py --max_rules 300) [default: all].")
@click.option("--question-unit", type=click.Choice([u.value for u in QuestionUnit]), default="triple",
              show_default=True,
              help="One question per removed triple, or per kept grounding (the official code's "
                   "count; questions about one triple stay in one split).")
@click.option("--tau", default=0.01, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Balancing threshold of Algorithm 1.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--questions", "question_mode", type=click.Choice(["template", "llm"]),
              default="template", show_default=True)
@click.option("--labels", type=click.Choice([*SURFACE_CHOICES, "id"]), default="private",
              show_default=True, help="Entity names in the output: private random ids, dataset ids, "
                                      "or text labels.")
@click.option("--relation-labels", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="TSV relation<TAB>label used to word template questions "
                                 "(e.g. Wikidata property labels).")
@click.option("--llm-base-url", default=None, envvar="OPENAI_BASE_URL",
              help="OpenAI-compatible endpoint [default: $OPENAI_BASE_URL or OpenAI].")
@click.option("--llm-model", default=None, help="Model name (required with --questions llm).")
@click.option("--llm-cache", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Response cache directory [default: {default_cache_dir()}].")
@click.option("--llm-workers", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--workers", default=None, type=click.IntRange(min=1),
              help="Concurrent rule queries, also the mining threads [default: up to 4, one per core, "
                   "on a store that reads concurrently (both backends), else 1].")
@click.option("-o", "--output", "out_dir", required=True,
              type=click.Path(file_okay=False, path_type=Path), help="Output directory.")
@click.option("--load", "load", is_flag=True,
              help="Also load the complete and incomplete KGs into the store as graphs "
                   "<load-as>-complete and <load-as>-incomplete.")
@click.option("--load-as", default=None, help="Graph name prefix for --load [default: GRAPH-brink].")
@click.option("--replace", is_flag=True, help="With --load: replace those graphs if they exist.")
def build_command(
    store_location: str | None, graph: str, rules_path: Path | None, max_len: int | None,
    groundings_per_rule: int, selection: str, max_candidates: int, max_rules: int | None,
    question_unit: str, tau: float,
    seed: int, question_mode: str, labels: str, relation_labels: Path | None,
    llm_base_url: str | None, llm_model: str | None, llm_cache: Path | None, llm_workers: int,
    workers: int | None, out_dir: Path, load: bool, load_as: str | None, replace: bool,
) -> None:
    """Build a BRINK dataset from GRAPH: remove rule-inferable triples, write questions,
    balance, complete answer sets, split 8:1:1, check answerability, write OUTDIR."""
    check_output_dir(out_dir, "-o/--output")  # before any mining or grounding
    writer = None
    if question_mode == "llm":
        if not llm_model:
            raise click.UsageError("--questions llm needs --llm-model")
        writer = LLMQuestionWriter(llm_model, base_url=llm_base_url, cache_dir=llm_cache)
    store = connect(store_location)
    try:
        if rules_path is not None:
            rules = [r for r in read_rules(rules_path) if max_len is None or r.rule.length <= max_len]
            require_groundable(store, graph, rules, rules_path)
        else:
            # the matrix engine mines an in-memory copy: its threads never touch the store
            threads = workers or min(4, os.cpu_count() or 1)
            rules = mine_rules(store, graph, max_len or 3, threads)
            click.echo(f"mined {len(rules):,} rules from {graph} (max length {max_len or 3})", err=True)
        options = BuildOptions(
            groundings_per_rule=groundings_per_rule, selection=Selection(selection),
            max_candidates=max_candidates, max_rules=max_rules, unit=QuestionUnit(question_unit),
            tau=tau, seed=seed,
            labels=parse_surface(labels),
            relation_labels=read_relation_labels(relation_labels) if relation_labels else {},
            workers=read_workers(store, workers),
            load_as=(load_as or f"{graph}-brink") if load else None, replace=replace,
        )
        result = build_brink(store, graph, rules, out_dir, options, writer=writer,
                             llm_workers=llm_workers, progress=show_progress(),
                             log=lambda m: click.echo(m, err=True))
    finally:
        store.close()
    click.echo(markdown(result.stats))
    # rules whose relations occur, yet no match (candidates is None when capped: not counted)
    if not result.stats["rules"]["with_groundings"]:
        raise KGEngineError(f"no rule has a grounding in graph {graph!r}: the BRINK dataset written "
                            f"to {out_dir} is empty")
    click.echo(f"wrote {', '.join(OUTPUT_FILES)} to {out_dir} in {result.stats['seconds']:.1f} s")


def require_groundable(store: KGStore, graph: str, rules: list[MinedRule], path: Path) -> None:
    """Refuse rules that cannot have a grounding in ``graph`` (none, or none whose relations
    all occur in it) before any work: a build of them is empty, not a success."""
    store.require_graph(graph, complete=True)
    present = {row["r"] for row in store.run("relation_counts", graph)}
    usable = [r for r in rules if all(atom.relation in present for atom in (*r.rule.body, r.rule.head))]
    if not usable:
        missing = sorted({a.relation for r in rules for a in (*r.rule.body, r.rule.head)} - present)
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        reason = f"relations not in the graph: {shown}" if missing else "the file has no rules"
        raise KGEngineError(f"no rule of {path} has a grounding in graph {graph!r}: {reason}")


@brink.command("stats")
@click.argument("out_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print stats.json instead of the tables.")
def stats_command(out_dir: Path, as_json: bool) -> None:
    """Print the statistics of a BRINK dataset directory."""
    path = out_dir / "stats.json"
    if not path.is_file():
        raise KGEngineError(f"{out_dir} has no stats.json (not a `kgengine brink build` output)")
    stats = json.loads(path.read_text(encoding="utf-8"))
    click.echo(json.dumps(stats, indent=2) if as_json else markdown(stats))
