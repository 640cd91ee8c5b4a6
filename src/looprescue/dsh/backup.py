"""Backups of session logs before an edit, and restoring the last one (``clean --undo``).

Layout: ``<DSH home>/sessions-loop-rescue-backup/<path relative to the sessions dir>``, i.e. a
sibling of the ``sessions`` data dir, so neither DSH nor a recursive scan mistakes it for a
session. A session outside the data dir goes by its own data dir when it lies in DSH's
layout (``<data dir>/--<project>--/<session>/``), else gets its backups beside it, in a
``sessions-loop-rescue-backup`` dir next to its session dir (a recursive scan skips that name
too). The newest backup always sits at that path; older ones are kept beside it with a
``.<UTC timestamp>`` suffix and come back one by one on repeated undo, up to ``keepBackups``
in all.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from pathlib import Path

from looprescue.dsh.discovery import BACKUP_DIR_NAME
from looprescue.dsh.errors import SessionAccessError, SessionEditError
from looprescue.dsh.writer import create_temp, replace_with_copy


def backup_path_for(log_path: Path, data_dir: Path | None = None) -> Path:
    """Where the backup of ``log_path`` goes."""
    log_path = Path(os.path.abspath(log_path))
    if data_dir is not None:
        data_dir = Path(os.path.abspath(data_dir))
        if log_path.is_relative_to(data_dir) and log_path.parent != data_dir:
            return data_dir.parent / BACKUP_DIR_NAME / log_path.relative_to(data_dir)
    session_dir = log_path.parent
    project_dir = session_dir.parent
    if _is_project_key(project_dir.name):
        # DSH's layout, <data dir>/--<project>--/<session>/: that data dir's sibling
        return (
            project_dir.parent.parent
            / BACKUP_DIR_NAME
            / project_dir.name
            / session_dir.name
            / log_path.name
        )
    return project_dir / BACKUP_DIR_NAME / session_dir.name / log_path.name


def _is_project_key(name: str) -> bool:
    return len(name) > 4 and name.startswith("--") and name.endswith("--")


def edit_lock_path(log_path: Path, data_dir: Path | None = None) -> Path:
    """Where looprescue's own lock on a session lives: beside the session's backups."""
    backup = backup_path_for(log_path, data_dir)
    return backup.with_name(f".{backup.name}.looprescue.lock")


def file_digest(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def make_backup(log_path: Path, backup: Path, keep: int | None = None) -> Path:
    """Copy ``log_path`` to ``backup`` and check the copy; an older backup at that path is
    rotated aside first. The copy is complete and checked before anything is renamed, so a
    kill at any point leaves every earlier backup where it was (and at most a temp file the
    next edit removes)."""
    try:
        backup.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp, fd = create_temp(backup, like=log_path)
        try:
            with os.fdopen(fd, "wb") as out, open(log_path, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())
            shutil.copystat(log_path, temp)
            if file_digest(temp) != file_digest(log_path):
                raise SessionEditError("backup copy does not match the original", path=backup)
            if backup.exists():
                stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(backup.stat().st_mtime))
                rotated = backup.with_name(f"{backup.name}.{stamp}")
                n = 1
                while rotated.exists():
                    n += 1
                    rotated = backup.with_name(f"{backup.name}.{stamp}-{n}")
                os.replace(backup, rotated)
            os.replace(temp, backup)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        if keep is not None:
            # the new backup and the keep - 1 newest older ones stay
            for old in older_backups(backup)[max(keep - 1, 0) :]:
                old.unlink(missing_ok=True)
    except OSError as err:
        raise SessionAccessError(
            f"cannot write the backup: {err.strerror or err}", path=err.filename or backup
        ) from None
    return backup


def older_backups(backup: Path) -> list[Path]:
    """Rotated backups, newest first."""
    if not backup.parent.is_dir():
        return []
    prefix = backup.name + "."
    found = [
        p
        for p in backup.parent.iterdir()
        if p.name.startswith(prefix) and p.suffix not in (".tmp", ".lock")
    ]
    return sorted(found, key=lambda p: p.name, reverse=True)


def restore_backup(log_path: Path, backup: Path) -> None:
    """Put ``backup`` back in place of ``log_path`` (atomically) and retire that backup; the
    next older backup, if any, becomes the one a further undo restores."""
    older = older_backups(backup)
    if not backup.is_file() and older:
        # a run killed between rotating the last backup aside and putting the new one in
        # place: the rotated one is the newest there is
        with contextlib.suppress(OSError):
            os.replace(older[0], backup)
    if not backup.is_file():
        raise SessionAccessError(
            "no backup to restore (nothing was cleaned or repaired)", path=backup
        )
    expected = file_digest(backup)

    def same_bytes(temp: Path) -> None:
        if file_digest(temp) != expected:
            raise SessionEditError("restored copy does not match the backup", path=temp)

    try:
        replace_with_copy(backup, log_path, same_bytes)
        backup.unlink()
        older = older_backups(backup)
        if older:
            os.replace(older[0], backup)
    except OSError as err:
        raise SessionAccessError(
            f"cannot restore the backup: {err.strerror or err}", path=err.filename or log_path
        ) from None
