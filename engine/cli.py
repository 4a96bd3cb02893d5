"""The ``kgengine`` command line. Each subcommand lives in its own module and is imported
only when invoked, so ``kgengine --help`` stays fast."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import click
from kgengine.errors import KGEngineError

# command name -> "module:attribute"
COMMANDS: dict[str, str] = {
    "load": "kgengine.commands.kg:load",
    "stats": "kgengine.commands.kg:stats",
    "graphs": "kgengine.commands.kg:graphs",
    "drop": "kgengine.commands.kg:drop",
    "query": "kgengine.commands.query:query",
    "mine": "kgengine.commands.mine:mine",
    "groundings": "kgengine.commands.mine:groundings_command",
    "serve": "kgengine.commands.serve:serve",
    "brink": "kgengine.commands.brink:brink",
    "ask": "kgengine.commands.ask:ask",
    "entity": "kgengine.commands.explore:entity",
    "neighbours": "kgengine.commands.explore:neighbours",
    "export": "kgengine.commands.explore:export",
    "eval": "kgengine.commands.eval:eval_group",
    "llm": "kgengine.commands.llm:llm",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        return getattr(import_module(module), attr)

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
