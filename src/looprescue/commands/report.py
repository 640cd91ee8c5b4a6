"""``looprescue report PATH... -o report.html``: one HTML page for a set of sessions."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import typer
from rich.console import Console

from looprescue.commands.common import (
    EXIT_BUG,
    EXIT_OK,
    EXIT_UNREADABLE,
    SET_HELP,
    parse_settings,
    report_crash,
    session_progress,
    worst,
)
from looprescue.config import ConfigError, load_config
from looprescue.dsh import SessionError, find_session_logs, resolve_data_dir
from looprescue.report import SessionReport, build_session, render_report
from looprescue.report.render import plural


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)


def report_command(
    paths: list[Path] | None = typer.Argument(
        None,
        metavar="PATH",
        help="Session files, session dirs or data dirs (default: the data dir).",
        show_default=False,
    ),
    output: Path = typer.Option(
        Path("report.html"), "--output", "-o", metavar="FILE", help="Where to write the page."
    ),
    data: Path | None = typer.Option(
        None, "--data", metavar="DIR", help="Data dir used when no PATH is given."
    ),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (detector.* and doctor.* keys)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Write one self-contained HTML page about a set of sessions.

    The page lists the sessions with their findings; per session, a timeline of its turns,
    each loop in its context (what is kept, what a cut removes) and each detour signal with
    its evidence events. Long sessions are shown in excerpts. The file needs nothing else
    to open: no network, no scripts.

    \b
    Examples:
      looprescue report ~/.dsh/sessions -o report.html
      looprescue report SESSION_DIR -o one.html

    Exit code 0 when the page is written, 2 when some input cannot be read (the page lists
    it) or the page cannot be written, 3 on a bug in looprescue.
    """
    err = Console(stderr=True)
    try:
        cfg = load_config(config, parse_settings(settings))
        logs = find_session_logs(list(paths) if paths else [resolve_data_dir(data)])
    except (ConfigError, SessionError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE) from None
    reports: list[SessionReport] = []
    codes: list[int] = []
    with session_progress(err, "reading") as progress:
        task = progress.add_task("report", total=len(logs))
        for path in logs:
            try:
                reports.append(build_session(path, cfg))
                codes.append(EXIT_OK)
            except SessionError as exc:
                typer.echo(f"error: {exc}", err=True)
                reports.append(SessionReport(str(path), error=str(exc)))
                codes.append(EXIT_UNREADABLE)
            except BrokenPipeError:
                raise
            except Exception as exc:
                report_crash(exc, path)
                reports.append(SessionReport(str(path), error="internal error (see stderr)"))
                codes.append(EXIT_BUG)
            progress.advance(task)
    try:
        write_atomically(output, render_report(reports))
    except OSError as exc:
        typer.echo(f"error: {output}: cannot write the report: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE) from None
    loops = sum(r.loops_total for r in reports)
    signals = sum(r.signals_total for r in reports)
    typer.echo(
        f"wrote {output}: {plural(len(reports), 'session')}, {plural(loops, 'loop')}, "
        f"{plural(signals, 'detour signal')}",
        err=True,
    )
    raise typer.Exit(worst(codes))


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename: a reader never sees half a page."""
    directory = path.parent if str(path.parent) else Path(".")
    descriptor, temp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # as a plain `> file` would create it
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
