"""The ``looprescue`` command line: one typer app, each subcommand in its own module.

Exit codes: 0 nothing found, 1 something found (a loop, a detour), 2 unreadable input or a
bad configuration, 3 a bug in looprescue. An exception no command handles is a bug: it is
reported as one line (``--debug`` adds the traceback) and can never end as exit code 1.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer
from typer.core import TyperGroup

from looprescue.commands.common import EXIT_BUG, EXIT_UNREADABLE, Settings, report_crash


def _framework_exceptions() -> tuple[
    tuple[type[BaseException], ...], tuple[type[BaseException], ...]
]:
    """(exits and usage errors the CLI framework handles itself, its "abort" exceptions):
    typer's own, and click's for typer versions built on click."""
    passing: list[type[BaseException]] = [typer.Exit]
    aborts: list[type[BaseException]] = [typer.Abort]
    if hasattr(typer, "TyperException"):
        passing.append(typer.TyperException)
    try:
        import click
    except ImportError:  # pragma: no cover - typer without click
        pass
    else:
        passing += [click.exceptions.Exit, click.ClickException]
        aborts.append(click.exceptions.Abort)
    return tuple(passing), tuple(aborts)


_PASSING, _ABORTS = _framework_exceptions()


class _GuardedGroup(TyperGroup):
    """Runs a subcommand; what escapes it unhandled is reported as a bug (exit code 3)."""

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except _ABORTS:
            # Ctrl-C or end of input at a prompt (the framework would exit with 1, "found")
            typer.echo("aborted: nothing was written (--yes answers without a prompt)", err=True)
            raise typer.Exit(EXIT_UNREADABLE) from None
        except _PASSING:
            raise
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # the reader of our output went away (`looprescue scan | head`): not a bug
            _silence_stdout()
            raise typer.Exit(141) from None
        except Exception as exc:
            report_crash(exc)
            raise typer.Exit(EXIT_BUG) from None


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


app = typer.Typer(
    name="looprescue",
    help="Detect, cut and rescue repetition loops in LLM agent streams and sessions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_GuardedGroup,
)


@app.callback()
def _options(
    debug: bool = typer.Option(
        False, "--debug", help="On an internal error, print the full traceback."
    ),
) -> None:
    """Detect, cut and rescue repetition loops in LLM agent streams and sessions.

    Exit codes: 0 nothing found, 1 something found, 2 unreadable input or bad config, 3 a bug.
    """
    Settings.debug = debug or bool(os.environ.get("LOOPRESCUE_DEBUG"))


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
    "looprescue.commands.report",
    "looprescue.commands.proxy",
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
