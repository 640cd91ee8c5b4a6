"""Where `clean` and `repair` keep their backups, how many, and who holds a session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.test_dsh_helpers import install_session

from looprescue.dsh import SessionLock
from looprescue.dsh.backup import BACKUP_DIR_NAME, edit_lock_path, make_backup, older_backups
from looprescue.dsh.lock import EditLock


def looprescue(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "looprescue", *args],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def torn(log: Path) -> bytes:
    """Tear the log's last frame, as a crash does; the torn bytes."""
    data = log.read_bytes()[:-10]
    log.write_bytes(data)
    return data


def test_a_repair_backup_of_a_session_outside_the_data_dir_goes_beside_it(tmp_path):
    data = tmp_path / "home" / "sessions"
    data.mkdir(parents=True)
    installed = install_session(tmp_path / "copies", "d_tool_loop")
    # a session dir copied out of any data dir's layout
    (tmp_path / "loose").mkdir()
    elsewhere = tmp_path / "loose" / installed.parent.name / installed.name
    installed.parent.rename(elsewhere.parent)
    before = torn(elsewhere)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    result = looprescue("repair", "--data", str(data), str(elsewhere), "--yes", cwd=cwd)
    assert result.returncode == 0, result.stderr
    session_dir = elsewhere.parent
    backup = session_dir.parent / BACKUP_DIR_NAME / session_dir.name / elsewhere.name
    assert backup.read_bytes() == before
    assert list(cwd.iterdir()) == []
    assert not (tmp_path / BACKUP_DIR_NAME).exists()
    # and undo finds it there
    undo = looprescue("clean", "--undo", str(elsewhere), "--data", str(data), "--yes", cwd=cwd)
    assert undo.returncode == 0, undo.stderr
    assert elsewhere.read_bytes() == before


def test_a_repair_backup_inside_the_data_dir_is_a_sibling_of_it(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "d_tool_loop")
    before = torn(log)
    result = looprescue("repair", log.parent.name[:16], "--data", "sessions", "--yes", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / BACKUP_DIR_NAME / log.relative_to(data)).read_bytes() == before


def test_backups_are_kept_to_keep_backups(tmp_path):
    log = tmp_path / "s" / "session.v4.jsonl"
    log.parent.mkdir()
    backup = tmp_path / "b" / "session.v4.jsonl"
    for number in range(5):
        log.write_text(f"version {number}\n")
        os.utime(log, (1_700_000_000 + number * 60,) * 2)  # each rotation gets its own stamp
        make_backup(log, backup, keep=3)
    assert backup.read_text() == "version 4\n"
    older = older_backups(backup)
    assert [p.read_text() for p in older] == ["version 3\n", "version 2\n"]


def test_clean_keeps_the_configured_number_of_backups(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    original = log.read_bytes()
    for _ in range(3):  # clean, put the loop back, clean again: a backup each time
        result = looprescue(
            "clean", str(log), "--data", str(data), "--yes", "--set", "keepBackups=2"
        )
        assert result.returncode == 0, result.stderr
        log.write_bytes(original)
    backup = tmp_path / BACKUP_DIR_NAME / log.relative_to(data)
    assert backup.is_file() and len(older_backups(backup)) == 1


def test_another_looprescue_is_told_apart_from_dsh(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    own = EditLock(edit_lock_path(log, data)).acquire()
    try:
        result = looprescue("clean", str(log), "--data", str(data), "--yes")
    finally:
        own.release()
    assert result.returncode == 2
    assert f"another looprescue run (pid {os.getpid()})" in result.stderr
    assert "DSH" not in result.stderr
    with SessionLock(log.parent):
        result = looprescue("clean", str(log), "--data", str(data), "--yes")
    assert result.returncode == 2 and "DSH is using this session" in result.stderr
    # nothing held: the edit goes through, and leaves no lock in the session dir
    result = looprescue("clean", str(log), "--data", str(data), "--yes")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in log.parent.iterdir()) == ["session.lock", log.name]
