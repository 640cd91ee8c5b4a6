"""``looprescue doctor``: detour signals (retry storms, repeated calls, tool misuse, …) from
DSH session logs, once over finished logs or continuously over a live one (``--follow``)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from looprescue.commands.common import (
    EXIT_FOUND,
    EXIT_OK,
    EXIT_UNREADABLE,
    SET_HELP,
    counted,
    data_option,
    emit,
    one_session,
    parse_settings,
    plural,
    report_session_error,
    report_warnings,
    session_logs,
    session_progress,
    sessions_argument,
    summary,
    worst,
)
from looprescue.config import ConfigError, DoctorConfig, load_config
from looprescue.doctor import DetourSignal, SessionAnalysis, analyze_log
from looprescue.doctor.tail import SessionTail
from looprescue.dsh import SessionError, open_log

EXIT_CLEAN, EXIT_SIGNALS = EXIT_OK, EXIT_FOUND


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)


def doctor_command(
    sessions: list[str] | None = sessions_argument(),
    data: Path | None = data_option(),
    json_output: bool = typer.Option(
        False, "--json", help="One JSON object per signal (errors too, as records)."
    ),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (doctor.* keys)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
    follow: str | None = typer.Option(
        None,
        "--follow",
        metavar="SESSION",
        help="Follow one live session (id, log or session dir) until Ctrl-C.",
    ),
    interval: float = typer.Option(
        0.5, "--interval", min=0.01, metavar="SECONDS", help="Time between polls with --follow."
    ),
) -> None:
    """Find detours in sessions: retry storms, tool loops, thrash.

    A detour is an agent going round in circles without repeating text: the same tool call
    again and again, a cycle of calls, a tool misused turn after turn, retried model
    requests, compaction over and over, a growing prompt, narration of the same step. Each
    signal names its kind, the turn, a metric, a one-line explanation and the seqs of the
    events that prove it.

    \b
    Examples:
      looprescue doctor                        every session in the data dir
      looprescue doctor 858d60ce --json        one session by id prefix, a JSON object per signal
      looprescue doctor --follow SESSION_DIR   a live session, signals as its turns end

    Exit code 1 when any signal is found, 0 when none, 2 when some input cannot be read (the
    other sessions are still analysed), 3 on a bug in looprescue.
    """
    err = Console(stderr=True, soft_wrap=True)
    try:
        options = load_config(config, parse_settings(settings)).doctor
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_UNREADABLE) from None
    if follow is not None:
        if sessions:
            err.print("[red]error:[/red] give either SESSION... or --follow SESSION, not both")
            raise typer.Exit(EXIT_UNREADABLE)
        raise typer.Exit(_follow(follow, data, options, json_output, interval, err))
    raise typer.Exit(_diagnose(sessions, data, options, json_output, err))


# -- finished logs ------------------------------------------------------------------------------


def _diagnose(
    sessions: list[str] | None,
    data: Path | None,
    options: DoctorConfig,
    json_output: bool,
    err: Console,
) -> int:
    try:
        logs = session_logs(sessions, data)
    except SessionError as exc:
        report_session_error(exc, json_output)
        return EXIT_UNREADABLE
    out = Console(highlight=False)
    codes = []
    found: list[int] = []  # signals per session with any
    with session_progress(err, "diagnosing", show=len(logs) > 1) as progress:
        task = progress.add_task("doctor", total=len(logs))
        for path in logs:
            work = lambda p=path: _diagnose_one(p, options, json_output, out, err, found)  # noqa: E731
            codes.append(one_session(path, json_output, work))
            progress.advance(task)
    summary(f"{plural(len(logs), 'session')}, {counted(sum(found), 'detour signal', len(found))}")
    return worst(codes)


def _diagnose_one(
    path: Path,
    options: DoctorConfig,
    json_output: bool,
    out: Console,
    err: Console,
    found: list[int],
) -> int:
    """One session's signals; its exit code."""
    log = open_log(path)
    try:
        signals = analyze_log(
            log.events(tolerate_torn_tail=True), log.session_id, options, header=log.header
        )
    finally:
        report_warnings(path, log.warnings)
    if log.torn_tail is not None:
        err.print(f"[yellow]note:[/yellow] {escape(str(log.torn_tail))}; read up to it")
    if json_output:
        for signal in signals:
            emit(_json_line(signal, path))
    else:
        _print_session(out, log.session_id, path, signals)
    if signals:
        found.append(len(signals))
    return EXIT_SIGNALS if signals else EXIT_CLEAN


def _json_line(signal: DetourSignal, path: Path) -> str:
    return orjson.dumps({**signal.to_dict(), "path": str(path)}).decode()


def _print_session(out: Console, session_id: str, path: Path, signals: list[DetourSignal]) -> None:
    if not signals:
        _print(out, f"[green]no detours[/green]  {escape(session_id)}  ({escape(str(path))})")
        return
    table = Table(title=f"{session_id}\n{path}", title_justify="left", show_lines=False)
    # at 80 columns the explanation gets the room: kinds and seqs wrap in narrow columns
    table.add_column("kind", style="bold", max_width=16)
    table.add_column("turn", justify="right")
    table.add_column("metric", justify="right")
    table.add_column("explanation", ratio=1, min_width=24)
    table.add_column("evidence seqs", max_width=14)
    for detour in signals:
        table.add_row(
            escape(_kind(detour)),
            "session" if detour.turn is None else str(detour.turn),
            str(detour.metric),
            escape(detour.explanation),
            _seqs(detour.evidence),
        )
    _print(out, table)


def _print(out: Console, renderable: object) -> None:
    """Render with ``out``'s width and colours, then write it as ``emit`` does (a progress bar
    on the same terminal is cleared first)."""
    with out.capture() as captured:
        out.print(renderable)
    emit(captured.get().rstrip("\n"))


def _kind(detour: DetourSignal) -> str:
    return detour.kind if detour.sub is None else f"{detour.kind} {detour.sub}"


def _seqs(evidence: tuple[int, ...]) -> str:
    return ", ".join(str(seq) for seq in evidence) or "-"


# -- a live log ---------------------------------------------------------------------------------


def _follow(
    target: str,
    data: Path | None,
    options: DoctorConfig,
    json_output: bool,
    interval: float,
    err: Console,
) -> int:
    try:
        logs = session_logs([target], data)
        if len(logs) != 1:
            err.print(
                f"[red]error:[/red] {escape(str(target))}: --follow needs one session, "
                f"found {len(logs)} session logs"
            )
            return EXIT_UNREADABLE
        path = logs[0]
        tail = SessionTail(path)
    except SessionError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_UNREADABLE
    out = Console(highlight=False, soft_wrap=True)
    shown: set[tuple] = set()
    analysis: SessionAnalysis | None = None

    def show(signals: list[DetourSignal]) -> None:
        for detour in signals:
            if detour.key in shown:
                continue  # already reported before the log was rotated or truncated
            shown.add(detour.key)
            if json_output:
                typer.echo(_json_line(detour, path))
            else:
                turn = "session" if detour.turn is None else f"turn {detour.turn}"
                out.print(
                    f"[bold]{escape(_kind(detour))}[/bold]  {turn}  metric {detour.metric}  "
                    f"{escape(detour.explanation)}  [dim]evidence {_seqs(detour.evidence)}[/dim]"
                )
            sys.stdout.flush()  # a watcher reads signals as turns end, not at exit

    err.print(f"following {escape(str(path))} (Ctrl-C to stop)")
    with _CtrlC() as ctrl_c:
        while not ctrl_c.pressed:
            try:
                update = tail.poll()
            except SessionError as exc:
                err.print(f"[red]error:[/red] {escape(str(exc))}")
                if analysis is not None:
                    show(analysis.finish())  # what was read before the damage still counts
                return EXIT_UNREADABLE
            for notice in update.notices:
                err.print(f"[yellow]note:[/yellow] {escape(notice)}")
            if update.restarted:
                analysis = None
            if update.header is not None:
                session_id = str(update.header.get("id", ""))
                analysis = SessionAnalysis(session_id, options, header=update.header)
                err.print(f"session {escape(session_id)}")
            if analysis is not None:
                for event in update.events:
                    show(analysis.feed(event))
            if not update.more:
                ctrl_c.sleep(interval)
    if analysis is not None:
        show(analysis.finish())
    err.print("stopped")
    return EXIT_SIGNALS if shown else EXIT_CLEAN


class _CtrlC:
    """Turns Ctrl-C into a flag checked between polls, so a batch of events is never cut in
    half and the session-level signals of everything read so far are still printed."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous = None

    def __enter__(self) -> _CtrlC:
        try:
            self._previous = signal.signal(signal.SIGINT, self._press)
        except ValueError:  # not the main thread: Ctrl-C stays a KeyboardInterrupt
            self._previous = None
        return self

    def __exit__(self, *exc: object) -> bool:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        # without our handler (not the main thread) an interrupt still ends following cleanly
        return bool(exc and exc[0] is KeyboardInterrupt)

    def _press(self, signum: int, frame: object) -> None:
        self.pressed = True

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.pressed and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
