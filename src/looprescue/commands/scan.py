"""``looprescue scan PATH...``: find loops in DSH session logs."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TransferSpeedColumn

from looprescue.commands.common import (
    EXIT_FOUND,
    EXIT_OK,
    EXIT_UNREADABLE,
    SET_HELP,
    one_session,
    parse_settings,
    report_session_error,
    report_warnings,
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
        help="Session files, session dirs or data dirs (default: the data dir).",
        readable=False,  # our reader reports unreadable files itself, naming them
    ),
    data: Path | None = typer.Option(
        None, "--data", help="Data dir used when no PATH is given.", readable=False
    ),
    show_all: bool = typer.Option(False, "--all", help="Also list scanned blocks without loops."),
    json_output: bool = typer.Option(False, "--json", help="One JSON object per line."),
    config: Path | None = typer.Option(None, "--config", help="YAML config (detector.* keys)."),
    settings: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
) -> None:
    """Replay every assistant message (and failed attempt) through the loop detector.

    Exit code 1 if any loop is found, 0 if none, 2 if some input cannot be read (every other
    session is still scanned), 3 on a bug in looprescue.
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
    progress = Progress(
        TextColumn("scanning"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} sessions"),
        TransferSpeedColumn(),
        console=err,
        transient=True,
        disable=not (err.is_terminal and any(p.is_dir() for p in inputs)),
    )
    with progress:
        task = progress.add_task("scan", total=len(logs))
        for log_path in logs:
            codes.append(
                one_session(
                    log_path,
                    json_output,
                    lambda p=log_path: _scan_one(p, cfg, show_all, json_output, progress),
                )
            )
            progress.advance(task)
    raise typer.Exit(worst(codes))


def _scan_one(log_path: Path, cfg, show_all: bool, json_output: bool, progress) -> int:
    """Scan one session; its exit code."""
    found = False
    log = open_log(log_path)
    try:
        for finding in scan_records(log.records(), log.session_id, str(log_path), cfg):
            found |= finding.is_loop
            if finding.is_loop or show_all:
                _emit(finding, json_output, progress)
    finally:
        report_warnings(log_path, log.warnings)
    return EXIT_FOUND if found else EXIT_OK


def _emit(finding: Finding, json_output: bool, progress: Progress) -> None:
    line = orjson.dumps(finding.to_dict()).decode() if json_output else format_finding(finding)
    typer.echo(line)
