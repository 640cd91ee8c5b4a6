"""The ``looprescue`` command line: one typer app, each subcommand in its own module.

Exit codes: 0 nothing found, 1 something found (a loop, a detour), 2 unreadable input or a
bad configuration, 3 a bug in looprescue. An exception no command handles is a bug: it is
reported as one line (``--debug`` adds the traceback) and can never end as exit code 1.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from looprescue.commands.common import EXIT_BUG, EXIT_UNREADABLE, Settings, report_crash
from looprescue.extras import missing_extra


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
        except ModuleNotFoundError as exc:
            # a feature of an extra that is not installed: say which, not "a bug"
            command = getattr(ctx, "invoked_subcommand", None) or ""
            error = missing_extra(exc, f"looprescue {command}".strip())
            if error is None:
                report_crash(exc)
                raise typer.Exit(EXIT_BUG) from None
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(EXIT_UNREADABLE) from None
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


class _Command(TyperCommand):
    """Help laid out as a well-kept CLI's: arguments by their metavar (``PATH...``), options
    with their value's metavar (``--data DIR``) and flags bare."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                repeat = "..." if param.nargs != 1 else ""
                pieces.append(f"{name}{repeat}" if param.required else f"[{name}]{repeat}")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), getattr(param, "help", None) or ""))
            elif (record := param.get_help_record(ctx)) is not None:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param: Any) -> str:
    name = param.metavar or (param.name or "").upper()
    return name + ("..." if param.nargs != 1 else "")


app = typer.Typer(
    name="looprescue",
    # bare `looprescue` prints the help and exits 0 (the callback does it: typer's
    # no_args_is_help exits 2, as for a usage error)
    invoke_without_command=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    # plain help text: reflowed paragraphs, \b blocks kept as written, no type labels
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    cls=_GuardedGroup,
)


@app.callback()
def _options(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False,
        "--debug",
        help="On an internal error, print the full traceback too (also after the command).",
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, help="Print looprescue's version and exit."
    ),
) -> None:
    """Stop repetition loops of reasoning models, live and in DSH session logs.

    A streaming proxy cuts a loop out of a model's response before the client sees it and
    resumes the task; offline commands find, report and clean loops and other detours in the
    session logs DeepSeek Harness (DSH) writes.

    \b
    Start here:
      looprescue demo                        watch the proxy rescue a looping model (offline)
      looprescue proxy --upstream URL        run the proxy in front of a model API
      looprescue scan                        find loops in your DSH sessions
      looprescue report -o report.html       one HTML page about your sessions

    Run 'looprescue COMMAND --help' for a command's options. Exit codes: 0 nothing found (or
    done), 1 something found (scan, doctor), 2 unreadable input or a bad config, 3 a bug in
    looprescue.
    """
    if version:
        from looprescue import __version__

        typer.echo(f"looprescue {__version__}")
        raise typer.Exit(0)
    Settings.debug = Settings.debug or debug or bool(os.environ.get("LOOPRESCUE_DEBUG"))
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


# Each module defines ``register(app)``; keeping the list here makes the CLI's surface visible
# in one place while every command stays a small unit of its own.
COMMAND_MODULES = (
    "looprescue.commands.proxy",
    "looprescue.commands.demo",
    "looprescue.commands.scan",
    "looprescue.commands.clean",
    "looprescue.commands.repair",
    "looprescue.commands.sessions",
    "looprescue.commands.doctor",
    "looprescue.commands.report",
    "looprescue.commands.eval",
    "looprescue.commands.config",
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)
for _info in app.registered_commands:
    if _info.cls in (None, TyperCommand):
        _info.cls = _Command


def take_debug_flag(args: list[str]) -> list[str]:
    """``args`` without ``--debug``, wherever it stands before a ``--``; Settings.debug is
    set when there was one. The crash line says "run again with --debug", and a user adds it
    at the end of the line they ran."""
    if "--" in args:
        end = args.index("--")
        head, tail = args[:end], args[end:]
    else:
        head, tail = args, []
    if "--debug" not in head:
        return args
    Settings.debug = True
    return [arg for arg in head if arg != "--debug"] + tail


def main() -> None:
    # also when run as `python -m looprescue`
    app(args=take_debug_flag(sys.argv[1:]), prog_name="looprescue")


if __name__ == "__main__":
    main()
