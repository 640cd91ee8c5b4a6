"""``looprescue repair SESSION``: make a log that a crash left unreadable readable again."""

from __future__ import annotations

from pathlib import Path

import typer

from looprescue.commands.common import (
    EXIT_UNREADABLE,
    SESSION_HELP,
    SET_HELP,
    data_option,
    note,
    one_log,
    parse_settings,
    report_warnings,
    summary,
)
from looprescue.config import load_config
from looprescue.dsh import is_locked_by_dsh, resolve_data_dir
from looprescue.dsh.edit import SessionEditor, ensure_editable
from looprescue.dsh.repair import plan_repair, verify_repair, write_repair
from looprescue.errors import LoopRescueError


def register(app: typer.Typer) -> None:
    app.command("repair")(repair_command)


def repair_command(
    session: str = typer.Argument(
        ...,
        metavar="SESSION",
        help=SESSION_HELP,
        show_default=False,
    ),
    data: Path | None = data_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would change; write nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    force: bool = typer.Option(False, "--force", help="Repair even while DSH holds the session."),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (keepBackups)."
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Bring back a session log that a crash left unreadable.

    Everything before a torn or truncated tail is kept byte for byte, the complete lines of
    the damaged part are salvaged into a fresh frame, and an open last turn is closed the
    way DSH closes one. Damage before the tail is reported, not repaired. Lock, backup and
    verification are those of clean; 'looprescue clean --undo SESSION' restores the backup.

    \b
    Examples:
      looprescue repair SESSION --dry-run
      looprescue repair SESSION --yes

    Exit code 0 on success or nothing to do, 2 on any error (nothing is written then), 3 on
    a bug in looprescue.
    """
    try:
        cfg = load_config(config, parse_settings(settings))
        data_dir = resolve_data_dir(data)
        log_path = one_log(session, data)
        if dry_run:
            plan = plan_repair(log_path)
            ensure_editable(plan.log)
            report_warnings(log_path, plan.warnings)
            for line in plan.describe():
                typer.echo(f"{log_path}: {line}")
            if is_locked_by_dsh(log_path.parent):
                typer.echo("note: DSH holds this session right now; a real repair would refuse")
            typer.echo("dry run: nothing was written")
            needed = "needs a repair" if plan.needed else "needs no repair"
            summary(f"1 session, {needed} (dry run: nothing was written)")
            return
        # Before the lock, so a legacy session dir does not get a lock file created in it.
        ensure_editable(plan_repair(log_path).log)
        warn = lambda message: typer.echo(message, err=True)  # noqa: E731
        with SessionEditor(
            log_path, data_dir=data_dir, force=force, warn=warn, keep_backups=cfg.keepBackups
        ) as editor:
            plan = plan_repair(log_path)
            ensure_editable(plan.log)
            report_warnings(log_path, plan.warnings)
            for line in plan.describe():
                typer.echo(f"{log_path}: {line}")
            if not plan.needed:
                summary("1 session, needs no repair: nothing was written")
                return
            if not yes and not typer.confirm("Repair the log?", default=False):
                summary("cancelled: nothing was written")
                return
            backup = editor.backup()
            writer = editor.writer(plan.log.encoding)
            try:
                write_repair(plan, writer)
            except BaseException:
                writer.abort()
                raise
            editor.commit(writer, verify_repair(plan))
        typer.echo(f"repaired {log_path}; backup: {backup}")
        typer.echo(f"undo with: looprescue clean --undo {log_path}")
        summary("1 session repaired")
    except LoopRescueError as exc:
        note(f"error: {exc}")
        summary("nothing was written")
        raise typer.Exit(EXIT_UNREADABLE) from None
