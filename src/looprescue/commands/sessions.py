"""``looprescue sessions``: list the DSH sessions of a data directory."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.table import Table

from looprescue.commands.common import (
    EXIT_BUG,
    EXIT_OK,
    EXIT_UNREADABLE,
    report_crash,
    report_warnings,
    worst,
)
from looprescue.dsh import (
    SessionError,
    SessionSummary,
    find_session_logs,
    resolve_data_dir,
    summarize_session,
)
from looprescue.formatting import format_size, format_time


def register(app: typer.Typer) -> None:
    app.command("sessions")(sessions_command)


def collect_summaries(
    data_dir: Path, err: Console
) -> tuple[list[SessionSummary], list[SessionError], bool]:
    """Summaries of every readable session, newest activity first, the read errors, and
    whether a bug was hit (reported at once; the other sessions are still read)."""
    summaries: list[SessionSummary] = []
    errors: list[SessionError] = []
    crashed = False
    for log in find_session_logs([data_dir]):
        try:
            summaries.append(summarize_session(log))
        except SessionError as exc:
            errors.append(exc)
        except BrokenPipeError:
            raise
        except Exception as exc:
            report_crash(exc, log)
            crashed = True
    summaries.sort(key=lambda s: s.last_event_time or s.created, reverse=True)
    return summaries, errors, crashed


def sessions_command(
    data: Path | None = typer.Option(
        None,
        "--data",
        metavar="DIR",
        help="Data dir (default: $DSH_HOME/sessions, else ~/.dsh/sessions).",
        readable=False,
    ),
    json_output: bool = typer.Option(False, "--json", help="One JSON object per session."),
) -> None:
    """List DSH sessions, newest activity first.

    One row per session, subagent sessions included: id, project, title, when it was
    created, its last event, turns, size, and whether DSH holds it open right now.

    Exit code 2 when the data dir or a session cannot be read (the others are still
    listed), 3 on a bug in looprescue.
    """
    err = Console(stderr=True)
    data_dir = resolve_data_dir(data)
    try:
        summaries, errors, crashed = collect_summaries(data_dir, err)
    except SessionError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE) from None
    if json_output:
        for summary in summaries:
            typer.echo(orjson.dumps(summary.to_dict()).decode())
    else:
        table = Table(title=f"DSH sessions in {data_dir}", title_justify="left")
        for column in ("#", "id", "project", "title", "created", "last event", "turns", "size"):
            table.add_column(
                column, justify="right" if column in ("#", "turns", "size") else "left"
            )
        table.add_column("DSH")
        for number, s in enumerate(summaries, start=1):
            table.add_row(
                str(number),
                s.id + (" (subagent)" if s.subagent else ""),
                s.project,
                s.title or "-",
                format_time(s.created),
                format_time(s.last_event_time),
                str(s.turns),
                format_size(s.size),
                "[yellow]open[/yellow]" if s.locked else "-",
            )
        out = Console()
        if not out.is_terminal:
            out = Console(width=240)  # piped: do not squeeze ids and titles into 80 columns
        out.print(table)
    for summary in summaries:
        report_warnings(summary.path, list(summary.warnings))
        if summary.damage:
            typer.echo(f"note: {summary.damage}", err=True)
    for exc in errors:
        typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(
        worst([EXIT_BUG if crashed else EXIT_OK, EXIT_UNREADABLE if errors else EXIT_OK])
    )
