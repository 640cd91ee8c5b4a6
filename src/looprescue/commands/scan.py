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
    one_session,
    parse_settings,
    report_session_error,
    report_warnings,
    session_progress,
    worst,
)
from looprescue.config import ConfigError, load_config
from looprescue.dsh import SessionError, find_session_logs, open_log, resolve_data_dir
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
            f"{len(f.seqs)} consecutive messages  “{f.excerpt}”"
        )
    head = f"{f.session}  {where}  seq {f.seq}{origin}  {f.channel}"
    if f.kind == "miss":
        return f"{head}  ok  {f.chars} chars, no loop"
    return (
        f"{head}  {f.rule}  {f.loop_chars} loop chars  cut at {f.prune_offset}/{f.chars}  "
        f"“{f.excerpt}”"
    )


def scan_command(
    paths: list[Path] | None = typer.Argument(
        None,
        metavar="PATH",
        help="Session logs, session dirs or data dirs (default: the data dir).",
        readable=False,  # our reader reports unreadable files itself, naming them
        show_default=False,
    ),
    data: Path | None = typer.Option(
        None,
        "--data",
        metavar="DIR",
        help="Data dir when no PATH is given (default: $DSH_HOME/sessions, else ~/.dsh/sessions).",
        readable=False,
    ),
    show_all: bool = typer.Option(False, "--all", help="Also list the blocks without loops."),
    json_output: bool = typer.Option(False, "--json", help="One JSON object per line."),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (detector.* keys)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Find loops in DSH session logs.

    Every reasoning and text block of every assistant message, and every failed attempt as
    it streamed, goes through the detector the proxy uses; the same visible text in
    consecutive messages is a narration loop. One line per loop: session, turn and step,
    seq, channel, rule, loop chars and where a cut would go.

    \b
    Examples:
      looprescue scan                          every session in the data dir
      looprescue scan ~/.dsh/sessions --json   one JSON object per loop
      looprescue scan SESSION_DIR --all        the blocks without loops too

    Exit code 1 when any loop is found, 0 when none, 2 when some input cannot be read (the
    other sessions are still scanned), 3 on a bug in looprescue.
    """
    err = Console(stderr=True)
    try:
        cfg = load_config(config, parse_settings(settings))
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE) from None
    inputs = list(paths) if paths else [resolve_data_dir(data)]
    try:
        logs = find_session_logs(inputs)
    except SessionError as exc:
        report_session_error(exc, json_output)
        raise typer.Exit(EXIT_UNREADABLE) from None
    codes: list[int] = []
    with session_progress(err, "scanning", show=len(logs) > 1) as progress:
        task = progress.add_task("scan", total=len(logs))
        for log_path in logs:
            codes.append(
                one_session(
                    log_path,
                    json_output,
                    lambda p=log_path: _scan_one(p, cfg, show_all, json_output),
                )
            )
            progress.advance(task)
    raise typer.Exit(worst(codes))


def _scan_one(log_path: Path, cfg, show_all: bool, json_output: bool) -> int:
    """Scan one session; its exit code."""
    found = False
    log = open_log(log_path)
    try:
        for finding in scan_records(log.records(), log.session_id, str(log_path), cfg):
            found |= finding.is_loop
            if finding.is_loop or show_all:
                _emit(finding, json_output)
    finally:
        report_warnings(log_path, log.warnings)
    return EXIT_FOUND if found else EXIT_OK


def _emit(finding: Finding, json_output: bool) -> None:
    line = orjson.dumps(finding.to_dict()).decode() if json_output else format_finding(finding)
    typer.echo(line)
