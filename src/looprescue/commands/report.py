"""``looprescue report PATH... -o report.html``: one HTML page for a set of sessions."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import orjson
import typer
from rich.console import Console

from looprescue.commands.common import (
    EXIT_BUG,
    EXIT_OK,
    EXIT_UNREADABLE,
    SET_HELP,
    crash_line,
    data_option,
    emit,
    note,
    parse_settings,
    plural,
    report_crash,
    report_session_error,
    session_logs,
    session_progress,
    sessions_argument,
    summary,
    worst,
)
from looprescue.config import ConfigError, load_config
from looprescue.dsh import SessionError


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)


def report_command(
    sessions: list[str] | None = sessions_argument(),
    output: Path = typer.Option(
        Path("report.html"), "--output", "-o", metavar="FILE", help="Where to write the page."
    ),
    data: Path | None = data_option(),
    json_output: bool = typer.Option(
        False,
        "--json",
        help="Also print what the page shows, one JSON object per session (errors too).",
    ),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (detector.* and doctor.* keys)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Write one self-contained HTML page about a set of sessions.

    The page lists the sessions costliest loops first, with a search, filters and pages that
    work on thousands of sessions: per session the loops, the tokens they cost (and money,
    with per-model prices in the config's prices key), the detours, what to run next and
    what clean would remove; a timeline of its turns, each loop in its context (what is
    kept, what a cut removes) and each detour signal with its evidence events. Long sessions
    are shown in excerpts. The file needs nothing else to open: no network, no files.

    \b
    Examples:
      looprescue report ~/.dsh/sessions -o report.html
      looprescue report SESSION_DIR -o one.html

    Exit code 0 when the page is written, 2 when some input cannot be read (the page lists
    it) or the page cannot be written, 3 on a bug in looprescue.
    """
    from looprescue.report import SessionReport, build_session, render_report

    err = Console(stderr=True)
    try:
        cfg = load_config(config, parse_settings(settings))
    except ConfigError as exc:
        note(f"error: {exc}")
        raise typer.Exit(EXIT_UNREADABLE) from None
    try:
        logs = session_logs(sessions, data)
    except SessionError as exc:
        report_session_error(exc, json_output)
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
                report_session_error(exc, json_output)
                reports.append(SessionReport(str(path), error=str(exc)))
                codes.append(EXIT_UNREADABLE)
            except BrokenPipeError:
                raise
            except Exception as exc:
                report_crash(exc, path)
                if json_output:
                    record = {"kind": "error", "path": str(path), "bug": True}
                    emit(orjson.dumps({**record, "message": crash_line(exc, path)}).decode())
                reports.append(SessionReport(str(path), error="internal error (see stderr)"))
                codes.append(EXIT_BUG)
            progress.advance(task)
    if json_output:
        for report in reports:
            if not report.error:
                emit(orjson.dumps(report.to_record(cfg.prices)).decode())
    try:
        write_atomically(output, render_report(reports, prices=cfg.prices))
    except OSError as exc:
        note(f"error: {output}: cannot write the report: {exc.strerror or exc}")
        raise typer.Exit(EXIT_UNREADABLE) from None
    loops = sum(r.loops_total for r in reports)
    signals = sum(r.signals_total for r in reports)
    summary(
        f"wrote {output}: {plural(len(reports), 'session')}, {plural(loops, 'loop')}, "
        f"{plural(signals, 'detour signal')}"
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
