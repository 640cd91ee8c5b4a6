"""``looprescue scan PATH...``: find loops in DSH session logs."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich.console import Console

from looprescue.commands.common import (
    EXIT_FOUND,
    EXIT_OK,
    EXIT_UNREADABLE,
    SET_HELP,
    counted,
    data_option,
    emit,
    note,
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
from looprescue.config import ConfigError, load_config
from looprescue.dsh import SessionError, open_log
from looprescue.dsh.findings import Finding, scan_records


def register(app: typer.Typer) -> None:
    app.command("scan")(scan_command)


def format_finding(f: Finding) -> str:
    """One readable line per finding."""
    where = f"t{f.turn}s{f.step}" if f.step is not None else f"t{f.turn}"
    if f.kind == "narration" and f.last_turn != f.turn:
        where = f"t{f.turn}-t{f.last_turn}"
    origin = " (failed attempt)" if f.source == "attempt" else ""
    if f.kind == "narration":
        seqs = ",".join(str(s) for s in f.seqs)
        return (
            f"{f.session}  {where}  seqs {seqs}  text  narration  same {f.chars}-char text in "
            f"{len(f.seqs)} consecutive messages  {_tokens(f)}  “{f.excerpt}”"
        )
    head = f"{f.session}  {where}  seq {f.seq}{origin}  {f.channel}"
    if f.kind == "miss":
        return f"{head}  ok  {f.chars} chars, no loop"
    return (
        f"{head}  {f.rule}  {f.loop_chars} loop chars  {_tokens(f)}  "
        f"cut at {f.prune_offset}/{f.chars}  “{f.excerpt}”"
    )


def _tokens(f: Finding) -> str:
    return f"{'' if f.tokens_from == 'usage' else '~'}{f.tokens} tokens"


def scan_command(
    sessions: list[str] | None = sessions_argument(),
    data: Path | None = data_option(),
    show_all: bool = typer.Option(False, "--all", help="Also list the blocks without loops."),
    json_output: bool = typer.Option(
        False, "--json", help="One JSON object per loop (errors too, as records)."
    ),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (detector.* keys)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Find loops in DSH session logs.

    Every reasoning and text block of every assistant message, and every failed attempt as
    it streamed, goes through the detector the proxy uses; the same visible text in
    consecutive messages is a narration loop. One line per loop: session, turn and step,
    seq, channel, rule, loop chars, the tokens the loop cost (from the log's usage, else
    estimated from its chars) and where a cut would go. The last line (on stderr) sums it
    up.

    \b
    Examples:
      looprescue scan                          every session in the data dir
      looprescue scan 858d60ce --json          one session by id prefix, one JSON object per loop
      looprescue scan SESSION_DIR --all        the blocks without loops too

    Exit code 1 when any loop is found, 0 when none, 2 when some input cannot be read (the
    other sessions are still scanned), 3 on a bug in looprescue.
    """
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
    codes: list[int] = []
    tally = ScanTally()
    with session_progress(err, "scanning", show=len(logs) > 1) as progress:
        task = progress.add_task("scan", total=len(logs))
        for log_path in logs:
            codes.append(
                one_session(
                    log_path,
                    json_output,
                    lambda p=log_path: _scan_one(p, cfg, show_all, json_output, tally),
                )
            )
            progress.advance(task)
    summary(tally.line(len(logs)))
    raise typer.Exit(worst(codes))


class ScanTally:
    """Loops, looping sessions and loop tokens over a scan, for its summary line."""

    def __init__(self) -> None:
        self.loops = 0
        self.sessions = 0
        self.tokens = 0
        self.estimated = False

    def add(self, findings: list[Finding]) -> None:
        loops = [f for f in findings if f.is_loop]
        if loops:
            self.sessions += 1
        self.loops += len(loops)
        self.tokens += sum(f.tokens for f in loops)
        self.estimated |= any(f.tokens_from != "usage" for f in loops)

    def line(self, sessions: int) -> str:
        text = f"{plural(sessions, 'session')}, {counted(self.loops, 'loop', self.sessions)}"
        if self.loops:
            about = "~" if self.estimated else ""
            text += f", {about}{self.tokens:,} output tokens in loops"
        return text


def _scan_one(log_path: Path, cfg, show_all: bool, json_output: bool, tally: ScanTally) -> int:
    """Scan one session; its exit code."""
    findings: list[Finding] = []
    log = open_log(log_path)
    try:
        for finding in scan_records(log.records(), log.session_id, str(log_path), cfg):
            if finding.is_loop:
                findings.append(finding)
            if finding.is_loop or show_all:
                _emit(finding, json_output)
    finally:
        report_warnings(log_path, log.warnings)
    tally.add(findings)
    return EXIT_FOUND if findings else EXIT_OK


def _emit(finding: Finding, json_output: bool) -> None:
    emit(orjson.dumps(finding.to_dict()).decode() if json_output else format_finding(finding))
