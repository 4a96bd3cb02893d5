"""``kgengine mine`` (AMIE 3 rule mining) and ``kgengine groundings`` (substitutions of a rule)."""

from __future__ import annotations

import difflib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from kgengine.cli_common import check_output_file, connect, graph_option, show_progress, store_option
from kgengine.errors import KGEngineError
from kgengine.fsutil import atomic_path
from kgengine.mining.groundings import HeadFilter, groundings
from kgengine.mining.io import AMIE_COLUMNS, MinedRule, write_json, write_tsv
from kgengine.mining.rules import RuleType, parse_rule
from kgengine.mining.search import (
    ENGINES,
    HeadResult,
    Miner,
    MiningOptions,
    available_cores,
    counting_engine,
)
from kgengine.progress import PhaseLog, progress_bar
from kgengine.store import resolve_graph
from rich.console import Console
from rich.table import Table


def summary_table(rules: list[MinedRule]) -> Table:
    counts = Counter(r.rule_type for r in rules)
    table = Table("rule type", "rules", title="mined rules by type")
    for kind in RuleType:
        table.add_row(str(kind), str(counts.get(kind, 0)))
    table.add_row("total", str(len(rules)), style="bold")
    return table


def _write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Write to a temporary sibling and rename: an interrupted run never leaves half a file."""
    try:
        with atomic_path(path) as partial:
            write(partial)
    except OSError as exc:  # checked writable before mining; now the disk is full or the like
        raise KGEngineError(f"cannot write {path}: {exc}") from exc


@click.command()
@store_option
@graph_option()
@click.option("--min-conf", type=float, default=0.3, show_default=True,
              help="Minimum standard confidence of an output rule.")
@click.option("--min-pca", type=float, default=0.4, show_default=True,
              help="Minimum PCA confidence of an output rule.")
@click.option("--min-hc", type=float, default=0.1, show_default=True,
              help="Minimum head coverage of any rule explored (AMIE's pruning threshold).")
@click.option("--max-len", type=int, default=3, show_default=True,
              help="Maximum rule length in atoms, head included (AMIE's -maxad).")
@click.option("--min-initial-support", type=int, default=100, show_default=True,
              help="Relations with fewer facts are never heads (AMIE's -minis).")
@click.option("--engine", "engine_name", type=click.Choice(ENGINES), default="matrix",
              show_default=True,
              help="matrix: sparse-matrix counting on an in-memory index; query: counting "
              "queries run by the store (SPARQL on Oxigraph, Cypher on Neo4j).")
@click.option("--threads", type=int, default=None,
              help="Head relations mined in parallel (worker processes for the matrix engine); "
                   "the rules are the same whatever the number [default: the available cores, "
                   "as AMIE 3].")
@click.option("--constants", is_flag=True, help="Also add instantiated atoms (AMIE's -const).")
@click.option("--no-skyline", is_flag=True,
              help="Output rules even when a more general rule has at least their PCA confidence.")
@click.option("--recursivity-limit", type=int, default=3, show_default=True,
              help="Maximum occurrences of one relation in a rule (AMIE's -rl).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="AMIE 3 TSV of the rules [default: standard output].")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the rules, their measures and rule types as JSON.")
def mine(store_location: str | None, graph: str | None, min_conf: float, min_pca: float,
         min_hc: float, max_len: int, min_initial_support: int, engine_name: str, threads: int | None,
         constants: bool, no_skyline: bool, recursivity_limit: int, output: Path | None,
         json_path: Path | None) -> None:
    """Mine Horn rules with AMIE 3's semantics (support, head coverage, standard and PCA
    confidence) and write them in AMIE 3's TSV format."""
    options = MiningOptions(
        min_conf=min_conf, min_pca=min_pca, min_hc=min_hc, max_len=max_len,
        min_initial_support=min_initial_support, skyline=not no_skyline, constants=constants,
        recursivity_limit=recursivity_limit, threads=available_cores() if threads is None else threads,
    )
    options.validate()  # bad thresholds and unwritable outputs fail before the store is touched
    check_output_file(output, "-o/--output")
    check_output_file(json_path, "--json")
    started = time.perf_counter()
    store = connect(store_location)
    try:
        name = resolve_graph(store, graph)
        interactive = show_progress()
        log = None if interactive else PhaseLog(every=10.0)  # without a terminal: log lines
        total = store.require_graph(name).triples if engine_name == "matrix" else 0
        with progress_bar(f"reading graph {name}", total=total or None,
                          enabled=interactive and bool(total)) as reading:
            if log is not None and total:
                reading = log
                log.start(f"reading graph {name} into the matrix index", total)
            engine = counting_engine(store, name, engine_name, reading.advance)
        miner = Miner(engine, options)
        heads = miner.heads()
        with progress_bar(f"mining {name}", total=len(heads), enabled=interactive) as bar:
            if log is not None:
                bar = log
                log.start(f"mining {name}: {len(heads)} head relations", len(heads))

            def done(result: HeadResult) -> None:
                if log is None:  # a log gets the count and ETA lines only
                    bar.update(description=f"mining {name}: {result.relation} ({len(result.rules)} rules)")
                bar.advance()

            try:
                results = miner.mine(done)
            except KeyboardInterrupt:
                raise click.ClickException("interrupted: no rules written") from None
    finally:
        store.close()
    rules = [rule for result in results for rule in result.rules]
    seconds = time.perf_counter() - started
    meta = {
        "graph": name, "engine": engine_name, "options": options.__dict__,
        "heads": len(heads), "rules": len(rules), "seconds": round(seconds, 3),
    }
    if output is None:
        sys.stdout.write("\t".join(AMIE_COLUMNS) + "\n")
        for rule in rules:
            sys.stdout.write("\t".join(rule.tsv_row()) + "\n")
    else:
        _write_atomically(output, lambda p: write_tsv(rules, p))
    if json_path is not None:
        _write_atomically(json_path, lambda p: write_json(rules, p, meta))
    console = Console(stderr=output is None)
    console.print(summary_table(rules))
    console.print(f"{len(rules)} rules from {len(heads)} head relations of graph {name!r} "
                  f"in {seconds:.1f} s ({engine_name} engine)"
                  + (f"; written to {output}" if output else ""))


@click.command(name="groundings")
@click.argument("rule_text", metavar="RULE")
@store_option
@graph_option()
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N substitutions.")
@click.option("--with-head", "head", flag_value="with",
              help="Only groundings whose head is a fact too (the rule's support).")
@click.option("--without-head", "head", flag_value="without",
              help="Only groundings whose head is missing (the rule's predictions).")
@click.option("--any-head", "head", flag_value="any", default=True,
              help="Every grounding of the body [default].")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def groundings_command(rule_text: str, store_location: str | None, graph: str | None,
                      limit: int | None, head: str, as_json: bool) -> None:
    """Substitutions that make every body atom of RULE a fact, found by running the rule body
    as a query. RULE is 'rel(?x,?y) & ... => h(?x,?y)' or AMIE's '?x rel ?y ... => ?x h ?y'."""
    try:
        rule = parse_rule(rule_text)
    except ValueError as exc:
        raise KGEngineError(f"cannot parse rule: {exc}") from None
    if not rule.is_connected:
        raise KGEngineError(f"rule {rule} is not connected")
    store = connect(store_location, read_only=True)
    try:
        name = resolve_graph(store, graph)
        known = {row["r"] for row in store.run("relation_counts", name)}
        for warning in _unknown_relations(rule, known, name):
            click.echo(f"warning: {warning}", err=True)
        # fetch past the limit (up to COUNT_CAP) so that the count printed is the total
        fetch = None if limit is None else max(limit + 1, COUNT_CAP + 1)
        found = groundings(store, name, rule, head=HeadFilter(head), limit=fetch)
    finally:
        store.close()
    total = len(found) if fetch is None or len(found) < fetch else None  # None: more than COUNT_CAP
    rows = found if limit is None else found[:limit]
    if as_json:
        click.echo(json.dumps({"rule": str(rule), "graph": name, "total": total,
                               "groundings": rows}, indent=1))
        return
    columns = list(rows[0]) if rows else sorted(v.lstrip("?") for v in rule.variables)
    counted = f"{total:,}" if total is not None else f"more than {COUNT_CAP:,}"
    if len(rows) == total:
        click.echo(f"{rule}: {len(rows):,} groundings")
    else:
        click.echo(f"{rule}: {len(rows):,} groundings shown of {counted} (cut at --limit {limit}; "
                   "leave it out for all)")
    table = Table(*columns)
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    Console().print(table)


COUNT_CAP = 100_000  # groundings counted at most for the total printed beside a --limit


def _unknown_relations(rule: Any, known: set[str], graph: str) -> list[str]:
    """A body relation the graph does not have is an error (the rule has no grounding); an
    unknown head relation a warning (every grounding is then a prediction)."""
    warnings = []
    for atom in (*rule.body, rule.head):
        if atom.relation in known:
            continue
        close = difflib.get_close_matches(atom.relation, sorted(known), n=3, cutoff=0.6)
        hint = (f"did you mean {', '.join(close)}?" if close
                else f"`kgengine stats --graph {graph}` lists its relations")
        if atom is rule.head:
            warnings.append(f"head relation {atom.relation!r} is not in graph {graph!r}, so every "
                            f"grounding of the body is a prediction; {hint}")
        else:
            raise KGEngineError(f"relation {atom.relation!r} is not in graph {graph!r}, so the rule has "
                                f"no grounding; {hint}")
    return warnings
