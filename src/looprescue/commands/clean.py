"""``looprescue clean [SESSION]``: cut loops out of a DSH session log, safely."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import typer
from rich.console import Console
from rich.progress import Progress

from looprescue.commands.common import (
    EXIT_OK,
    EXIT_UNREADABLE,
    SESSION_HELP,
    SET_HELP,
    busy,
    byte_progress,
    crash_line,
    data_option,
    emit,
    error_record,
    note,
    one_log,
    parse_settings,
    plural,
    report_warnings,
    session_progress,
    summary,
)
from looprescue.config import load_config
from looprescue.dsh import (
    Record,
    SessionAccessError,
    SessionError,
    SessionLog,
    find_session_logs,
    is_locked_by_dsh,
    open_log,
    resolve_data_dir,
)
from looprescue.dsh.backup import backup_path_for, older_backups, restore_backup
from looprescue.dsh.clean import CleanPlan, plan_clean
from looprescue.dsh.edit import SessionEditor, ensure_editable, rewrite_lines, verify_line_edits
from looprescue.dsh.findings import scan_records
from looprescue.dsh.prune import Language
from looprescue.errors import LoopRescueError
from looprescue.formatting import format_time


def register(app: typer.Typer) -> None:
    app.command("clean")(clean_command)


def describe_plan(plan: CleanPlan) -> list[str]:
    """Exactly what would change, per message."""
    if not plan.changes:
        return [f"{plan.log.path}: no loops in assistant messages; nothing to change"]
    lines = [
        f"{plan.log.path}: {len(plan.changes)} assistant message(s) to cut, "
        f"{plan.removed_chars} chars removed"
    ]
    for change in plan.changes:
        lines.append(
            f"  seq {change.seq} (t{change.turn}s{change.step}, line {change.line}): "
            f"{change.removed_chars} chars removed"
        )
        for block in change.blocks:
            cut = block.cut
            action = (
                "block dropped" if cut.dropped else f"keep {cut.kept_chars}/{cut.original_chars}"
            )
            lines.append(f"    {cut.channel} block {cut.index} [{block.rule}]: {action}")
            lines.append(f"      marker: {cut.marker or '(none)'}")
            lines.append(f"      before: {block.before}")
            lines.append(f"      after:  {block.after}")
    lines.append("  also: data.stream deltas and block-end rewritten to match; replayState removed")
    return lines


def _looping_sessions(data_dir: Path, cfg) -> list[tuple[Path, str, float, int]]:
    """(log, session id, last event time, loop count) of sessions with loops, newest first.
    A session that cannot be read (or hits a bug) is reported and left out of the list."""
    found = []
    logs = find_session_logs([data_dir])
    with session_progress(Console(stderr=True), "scanning", show=len(logs) > 1) as progress:
        task = progress.add_task("scan", total=len(logs))
        for log_path in logs:
            progress.advance(task)
            try:
                log = open_log(log_path)
                last = [log.header["createdAt"]]

                def timed(records, last=last):
                    for record in records:
                        last[0] = record.event["time"]
                        yield record

                records = timed(log.records())
                loops = sum(
                    1
                    for f in scan_records(records, log.session_id, str(log_path), cfg)
                    if f.kind == "loop" and f.source == "message"
                )
            except SessionError as exc:
                note(f"warning: skipping unreadable session: {exc}")
                continue
            except BrokenPipeError:
                raise
            except Exception as exc:
                note(f"warning: skipping a session: {crash_line(exc, log_path)}")
                continue
            if loops:
                found.append((log_path, log.session_id, last[0], loops))
    found.sort(key=lambda item: item[2], reverse=True)
    return found


def _pick_session(data_dir: Path, cfg, assume_yes: bool) -> Path | None:
    candidates = _looping_sessions(data_dir, cfg)
    if not candidates:
        typer.echo(f"no sessions with loops in {data_dir}")
        return None
    for number, (_path, session_id, last, loops) in enumerate(candidates, start=1):
        typer.echo(f"{number:>3}  {session_id}  last event {format_time(last)}  {loops} loop(s)")
    if assume_yes:
        return candidates[0][0]
    choice = typer.prompt("Clean which session? (Enter = newest)", default="1", show_default=False)
    try:
        index = int(choice)
        if not 1 <= index <= len(candidates):
            raise ValueError
    except ValueError:
        raise SessionAccessError(f"not a listed number: {choice!r}") from None
    return candidates[index - 1][0]


def clean_command(
    session: str | None = typer.Argument(
        None,
        metavar="SESSION",
        help=SESSION_HELP + " Omit it to pick from a list of the sessions with loops.",
        show_default=False,
    ),
    data: Path | None = data_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; write nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    undo: bool = typer.Option(False, "--undo", help="Restore the session's last backup."),
    force: bool = typer.Option(False, "--force", help="Edit even while DSH holds the session."),
    marker: bool | None = typer.Option(
        None,
        "--marker/--no-marker",
        help="Leave a one-line note where text was removed (default: the marker key, true).",
        show_default=False,
    ),
    language: str | None = typer.Option(
        None, "--language", metavar="auto|zh|en", help="Language of the marker (default: auto)."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (detector.*, marker, language)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Cut the loops out of a DSH session, with a backup.

    Each looping reasoning or text block of an assistant message is cut back to where its
    loop began and a one-line marker is left, so a resumed session no longer imitates the
    loop. While DSH's own lock keeps DSH out, the log is backed up, the new log is written
    to a temp file, verified by reading it back, and put in place in one rename.

    \b
    Examples:
      looprescue clean                         pick from the sessions with loops
      looprescue clean SESSION --dry-run       show exactly what would change
      looprescue clean SESSION --yes           clean without asking
      looprescue clean --undo SESSION          restore the last backup

    Exit code 0 on success or nothing to do, 2 on any error (nothing is written then), 3 on
    a bug in looprescue.
    """
    try:
        flags = {"marker": marker, "language": language}
        overrides = {
            **parse_settings(settings),
            **{k: v for k, v in flags.items() if v is not None},
        }
        cfg = load_config(config, overrides)
        data_dir = resolve_data_dir(data)
        if session is None:
            if undo:
                raise SessionAccessError("--undo needs the SESSION to restore")
            picked = _pick_session(data_dir, cfg, yes)
            if picked is None:
                raise typer.Exit(EXIT_OK)
            log_path = picked
        else:
            log_path = one_log(session, data)
        if undo:
            _undo(log_path, data_dir, force, yes)
        else:
            _clean(log_path, data_dir, cfg, dry_run, yes, force, json_output)
    except LoopRescueError as exc:
        note(f"error: {exc}")
        if json_output:
            emit(orjson.dumps(error_record(exc)).decode())
        summary("nothing was written")
        raise typer.Exit(EXIT_UNREADABLE) from None


def _clean(log_path, data_dir, cfg, dry_run, yes, force, json_output) -> None:
    language: Language = cfg.language
    if dry_run:
        log = open_log(log_path)
        ensure_editable(log)
        plan = _plan(log, cfg, language)
        _show(plan, json_output)
        if is_locked_by_dsh(log_path.parent):
            typer.echo("note: DSH holds this session right now; a real clean would refuse")
        typer.echo("dry run: nothing was written")
        summary(
            f"1 session, {plural(len(plan.changes), 'message')} to cut, "
            f"{plan.removed_chars:,} chars (dry run: nothing was written)"
        )
        return
    ensure_editable(open_log(log_path))  # before the lock: a legacy dir gets no lock file
    warn = lambda message: typer.echo(message, err=True)  # noqa: E731
    with SessionEditor(
        log_path, data_dir=data_dir, force=force, warn=warn, keep_backups=cfg.keepBackups
    ) as editor:
        log = open_log(log_path)
        plan = _plan(log, cfg, language)
        _show(plan, json_output)
        if not plan.changes:
            summary("1 session, no loops to cut: nothing was written")
            return
        if not yes and not typer.confirm("Apply these changes?", default=False):
            summary("cancelled: nothing was written")
            return
        with busy(Console(stderr=True), "backing up, writing and verifying the log"):
            backup = editor.backup()
            writer = editor.writer(log.encoding)
            try:
                rewrite_lines(log, plan.replacements, writer)
            except BaseException:
                writer.abort()
                raise
            editor.commit(writer, verify_line_edits(log, plan.replacements))
    typer.echo(f"cleaned {log_path} ({plan.removed_chars} chars removed); backup: {backup}")
    typer.echo(f"undo with: looprescue clean --undo {log_path}")
    summary(
        f"1 session cleaned: {plural(len(plan.changes), 'message')} cut, "
        f"{plan.removed_chars:,} chars removed"
    )


def _plan(log, cfg, language: Language) -> CleanPlan:
    """The one plan a dry run shows and a real clean carries out."""
    with byte_progress(Console(stderr=True), "reading") as progress:
        watched = _ReadProgress(log, progress)
        plan = plan_clean(watched, cfg, marker=cfg.marker, language=language)  # type: ignore[arg-type]
    report_warnings(log.path, log.warnings)
    for reason in plan.skipped:
        typer.echo(f"warning: {log.path}: {reason}", err=True)
    return plan


class _ReadProgress:
    """``log`` whose records advance a progress bar by the bytes of the file read so far."""

    def __init__(self, log: SessionLog, progress: Progress) -> None:
        self._log = log
        self._progress = progress
        try:
            size: int | None = log.path.stat().st_size
        except OSError:
            size = None  # the reader reports what went wrong
        self._task = progress.add_task("read", total=size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    def records(self, **options: Any) -> Iterator[Record]:
        for record in self._log.records(**options):
            line = record.line
            if line is not None:
                position = line.frame_offset if line.frame_offset is not None else line.offset
                self._progress.update(self._task, completed=position)
            yield record


def _show(plan: CleanPlan, json_output: bool) -> None:
    if json_output:
        record = {"path": str(plan.log.path), "session": plan.log.session_id}
        record["changes"] = [c.to_dict() for c in plan.changes]
        typer.echo(orjson.dumps(record).decode())
    else:
        for line in describe_plan(plan):
            typer.echo(line)


def _undo(log_path: Path, data_dir: Path, force: bool, yes: bool) -> None:
    backup = backup_path_for(log_path, data_dir)
    if not backup.is_file() and not older_backups(backup):
        raise SessionAccessError(
            "no backup to restore (nothing was cleaned or repaired)", path=backup
        )
    typer.echo(f"restore {log_path} from {backup}")
    if not yes and not typer.confirm("Restore the backup?", default=False):
        typer.echo("cancelled: nothing was written")
        return
    warn = lambda message: typer.echo(message, err=True)  # noqa: E731
    with SessionEditor(log_path, data_dir=data_dir, force=force, warn=warn) as editor:
        editor.check_unchanged()
        restore_backup(log_path, backup)
    typer.echo(f"restored {log_path}")
    summary(f"1 session restored from {backup}")
