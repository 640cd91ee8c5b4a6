"""``looprescue sessions``: list the DSH sessions of a data directory."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from looprescue.commands.common import (
    EXIT_BUG,
    EXIT_OK,
    EXIT_UNREADABLE,
    data_option,
    emit,
    note,
    plural,
    report_crash,
    report_session_error,
    report_warnings,
    session_logs,
    session_progress,
    sessions_argument,
    summary,
    worst,
)
from looprescue.dsh import (
    SessionError,
    SessionSummary,
    resolve_data_dir,
    summarize_session,
)
from looprescue.dsh.discovery import short_ids
from looprescue.formatting import format_size, format_time


def register(app: typer.Typer) -> None:
    app.command("sessions")(sessions_command)


def collect_summaries(
    logs: list[Path], err: Console
) -> tuple[list[SessionSummary], list[SessionError], bool]:
    """Summaries of every readable session, newest activity first, the read errors, and
    whether a bug was hit (reported at once; the other sessions are still read)."""
    summaries: list[SessionSummary] = []
    errors: list[SessionError] = []
    crashed = False
    with session_progress(err, "reading", show=len(logs) > 1) as progress:
        task = progress.add_task("sessions", total=len(logs))
        for log in logs:
            try:
                summaries.append(summarize_session(log))
            except SessionError as exc:
                errors.append(exc)
            except BrokenPipeError:
                raise
            except Exception as exc:
                report_crash(exc, log)
                crashed = True
            progress.advance(task)
    summaries.sort(key=lambda s: s.last_event_time or s.created, reverse=True)
    return summaries, errors, crashed


# Below this width the table shows each id's shortest unique prefix (which every command
# accepts back) and leaves out the creation time.
WIDE_TABLE = 150


def sessions_command(
    sessions: list[str] | None = sessions_argument(),
    data: Path | None = data_option(),
    json_output: bool = typer.Option(
        False, "--json", help="One JSON object per session (errors too, as records)."
    ),
) -> None:
    """List DSH sessions, newest activity first.

    One row per session, subagent sessions included: id, project, title, when it was
    created, its last event, turns, size, and whether DSH holds it open right now. On a
    narrow terminal an id is shown by its shortest unique prefix, which every command
    accepts in its place.

    Exit code 2 when the data dir or a session cannot be read (the others are still
    listed), 3 on a bug in looprescue.
    """
    err = Console(stderr=True)
    try:
        logs = session_logs(sessions, data)
        summaries, errors, crashed = collect_summaries(logs, err)
    except SessionError as exc:
        report_session_error(exc, json_output)
        raise typer.Exit(EXIT_UNREADABLE) from None
    if json_output:
        for summary_ in summaries:
            emit(orjson.dumps(summary_.to_dict()).decode())
    else:
        _print_table(summaries, sessions, data)
    for summary_ in summaries:
        report_warnings(summary_.path, list(summary_.warnings))
        if summary_.damage:
            note(f"note: {summary_.damage}")
    for exc in errors:
        report_session_error(exc, json_output)
    open_now = sum(1 for s in summaries if s.locked)
    line = plural(len(summaries), "session")
    if open_now:
        line += f", {open_now} open in DSH"
    if errors:
        line += f", {len(errors)} unreadable"
    summary(line)
    raise typer.Exit(
        worst([EXIT_BUG if crashed else EXIT_OK, EXIT_UNREADABLE if errors else EXIT_OK])
    )


def _print_table(
    summaries: list[SessionSummary], refs: list[str] | None, data: Path | None
) -> None:
    out = Console()
    if not out.is_terminal:
        out = Console(width=240)  # piped: do not squeeze ids and titles into 80 columns
    wide = out.width >= WIDE_TABLE
    shown_ids = {s.id: s.id for s in summaries} if wide else short_ids(s.id for s in summaries)
    shown_ids = {s.id: shown_ids[s.id] + (" (sub)" if s.subagent else "") for s in summaries}
    where = ", ".join(refs) if refs else str(resolve_data_dir(data))
    table = Table(
        title=f"DSH sessions in {where}",
        title_justify="left",
        box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD,
    )
    table.add_column("#", justify="right")
    # an id is never cut: it is what the other commands take
    table.add_column("id", no_wrap=True, min_width=max(map(len, shown_ids.values()), default=2))
    if wide:
        table.add_column("project")
        table.add_column("title")
        table.add_column("created", no_wrap=True)
    else:
        # what the other columns leave: each column has 2 chars of padding and the box 2 more
        number_width = len(str(len(summaries)))
        fixed = number_width + max(map(len, shown_ids.values()), default=2) + 11 + 5 + 8 + 3
        room = max(12, out.width - fixed - 7 * 2 - 8)
        table.add_column("project · title", overflow="ellipsis", no_wrap=True, width=room)
    table.add_column("last event", no_wrap=True, min_width=11)
    table.add_column("turns", justify="right", min_width=5)
    table.add_column("size", justify="right", no_wrap=True, min_width=8)
    table.add_column("DSH")
    for number, s in enumerate(summaries, start=1):
        row = [str(number), escape(shown_ids[s.id])]
        if wide:
            row += [escape(s.project), escape(s.title or "-"), format_time(s.created)]
            last = format_time(s.last_event_time)
        else:
            row.append(escape(f"{s.project} · {s.title or '-'}"))
            last = format_time(s.last_event_time)[5:]  # month-day and time
        row += [
            last,
            str(s.turns),
            format_size(s.size),
            "[yellow]open[/yellow]" if s.locked else "-",
        ]
        table.add_row(*row)
    out.print(table)
