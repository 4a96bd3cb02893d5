"""The ``kgengine`` command line. Each subcommand lives in its own module and is imported
only when invoked, so ``kgengine --help`` stays fast."""

from __future__ import annotations

from typing import Any

import click
from kgengine.errors import KGEngineError
from kgengine.registry import Registry, instance_of

# command name -> ("module:attribute", the one line `kgengine --help` lists it with). The
# line lives here so that listing the commands imports none of them (torch, openai, scipy).
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "load": ("kgengine.commands.kg:load", "Load a dataset (Family, FB15k-237, MetaQA, ...) or your triples."),
    "stats": ("kgengine.commands.kg:stats", "Counts and degree statistics of one graph (or of every graph)."),
    "graphs": ("kgengine.commands.kg:graphs", "List the graphs in the store."),
    "drop": ("kgengine.commands.kg:drop", "Remove a graph from the store."),
    "query": ("kgengine.commands.query:query", "Run a read query: SPARQL on Oxigraph, Cypher on Neo4j."),
    "mine": ("kgengine.commands.mine:mine", "Mine Horn rules with AMIE 3's semantics."),
    "groundings": ("kgengine.commands.mine:groundings_command", "The groundings of a rule in a graph."),
    "serve": ("kgengine.commands.serve:serve", "Serve the store over the SPARQL 1.1 Protocol."),
    "brink": ("kgengine.commands.brink:brink", "Build and inspect BRINK benchmarks."),
    "ask": ("kgengine.commands.ask:ask", "Answer a question over a graph, with the KG evidence."),
    "entity": ("kgengine.commands.explore:entity", "Find entities by id, private id or label."),
    "neighbours": ("kgengine.commands.explore:neighbours", "The k-hop subgraph around an entity."),
    "export": ("kgengine.commands.explore:export", "Write a graph out (TSV or N-Triples)."),
    "eval": ("kgengine.commands.eval:eval_group", "Evaluate answering methods: strict BRINK metrics, Hit@1."),
    "llm": ("kgengine.commands.llm:llm", "The packaged local LLM: list it, serve it."),
}

# every command: the built-ins above, a package's (entry points `kgengine.commands`: a click
# command), one added at run time
COMMANDS: Registry[click.Command] = Registry(
    "command", "kgengine.commands", {name: ref for name, (ref, _) in BUILTIN_COMMANDS.items()},
    accepts=instance_of(click.Command), expected="a click command")


def command_help(name: str) -> str:
    """The line ``kgengine --help`` lists ``name`` with: a built-in's without importing it, a
    plugin's from its own short help."""
    if name in BUILTIN_COMMANDS:
        return BUILTIN_COMMANDS[name][1]
    try:
        return COMMANDS.get(name).get_short_help_str()
    except KGEngineError as exc:  # a broken plugin is listed with its one-line error
        return f"(unavailable: {exc})"


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS.names())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        try:
            return COMMANDS.get(name)
        except KGEngineError as exc:  # a broken plugin command: one line, not a traceback
            raise click.ClickException(str(exc)) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, command_help(name)) for name in self.list_commands(ctx)])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KGEngineError as exc:  # a user error: one line; anything else is a bug (traceback)
            raise click.ClickException(str(exc)) from exc


@click.group(cls=LazyGroup)
@click.version_option(package_name="kgengine")
def main() -> None:
    """kgengine: load KGs into Oxigraph or Neo4j, mine rules, build BRINK, serve SPARQL."""


if __name__ == "__main__":
    main()
