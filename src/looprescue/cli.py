"""The ``looprescue`` command line: one typer app, each subcommand in its own module."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="looprescue",
    help="Detect, cut and rescue repetition loops in LLM agent streams and sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Each module defines ``register(app)``; keeping the list here makes the CLI's surface visible
# in one place while every command stays a small unit of its own.
COMMAND_MODULES = (
    "looprescue.commands.demo",
    "looprescue.commands.eval",
    "looprescue.commands.doctor",
    "looprescue.commands.sessions",
    "looprescue.commands.scan",
    "looprescue.commands.clean",
    "looprescue.commands.repair",
    "looprescue.commands.proxy",
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
