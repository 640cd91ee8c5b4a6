"""Odd files where session logs are expected (FIFOs, devices, symlink loops), temp files left
by killed runs, and file modes: on real files, through the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_dsh_helpers import fixture_log, install_session, tree_state
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh import SessionAccessError, find_session_logs, open_log
from looprescue.dsh.backup import backup_path_for

runner = CliRunner()
ODD_FILES = {
    "fifo": lambda path: os.mkfifo(path),
    "device": lambda path: path.symlink_to("/dev/zero"),
    "symlink loop": lambda path: path.symlink_to(path.name),
}
ODD_REASONS = {
    "fifo": "not a regular file (a FIFO)",
    "device": "not a regular file (a character device)",
    "symlink loop": "too many levels of symbolic links (a symlink loop?)",
}


def cli(*args: object, timeout: float = 60) -> subprocess.CompletedProcess:
    """The real command line in a child process (a hang fails the test, it cannot stall it)."""
    command = [sys.executable, "-c", "from looprescue.cli import main; main()"]
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def odd_session(data: Path, kind: str) -> Path:
    session_dir = data / "--home-ana-proj--" / f"session-odd-{kind.replace(' ', '-')}"
    session_dir.mkdir(parents=True)
    log = session_dir / "session.v4.jsonl.zstd"
    ODD_FILES[kind](log)
    return log


@pytest.mark.parametrize("kind", ODD_FILES)
@pytest.mark.parametrize("command", ["sessions", "scan DIR", "doctor DIR", "clean picker"])
def test_an_odd_file_named_like_a_log_is_reported_and_the_rest_processed(tmp_path, kind, command):
    data = tmp_path / "sessions"
    good = install_session(data, "b_verbatim_cycle")
    odd = odd_session(data, kind)
    args = {
        "sessions": ["sessions", "--data", data],
        "scan DIR": ["scan", data],
        "doctor DIR": ["doctor", data],
        "clean picker": ["clean", "--data", data, "--dry-run", "--yes"],
    }[command]
    state = tree_state(tmp_path) if kind != "device" else None
    result = cli(*args)
    assert "Traceback" not in result.stderr
    assert f"{odd}: {ODD_REASONS[kind]}" in result.stderr
    if command == "clean picker":
        assert result.returncode == 0 and f"{good}: 1 assistant message(s) to cut" in result.stdout
    else:
        assert result.returncode == 2, result.stderr
        assert good.parent.name in result.stdout  # the readable session was still processed
    if state is not None:
        assert tree_state(tmp_path) == state


@pytest.mark.parametrize("kind", ODD_FILES)
@pytest.mark.parametrize("command", ["scan", "doctor", "clean", "repair"])
def test_an_odd_file_given_by_name_is_an_error(tmp_path, kind, command):
    log = odd_session(tmp_path / "sessions", kind)
    extra = ["--yes"] if command in ("clean", "repair") else []
    result = cli(command, log, *extra)
    assert result.returncode == 2, result.stderr
    assert f"error: {log}: " in result.stderr and "Traceback" not in result.stderr


def test_find_session_logs_never_resolves_a_symlink_loop(tmp_path):
    loop = tmp_path / "session.v4.jsonl.zstd"
    loop.symlink_to(loop.name)
    with pytest.raises(SessionAccessError, match="symbolic links"):
        find_session_logs([loop])
    with pytest.raises(SessionAccessError, match="symbolic links"):
        open_log(loop)
    assert find_session_logs([tmp_path]) == [loop]  # listed by name; opening it says why not


def test_a_fifo_lock_file_does_not_block_the_listing(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "g_healthy_long_answer")
    (log.parent / "session.lock").unlink()
    os.mkfifo(log.parent / "session.lock")
    result = cli("sessions", "--data", data, "--json")
    assert result.returncode == 0, result.stderr
    result = cli("clean", log, "--data", data, "--yes")
    assert result.returncode == 2 and "the lock file is not a regular file" in result.stderr


# -- temp files and modes ------------------------------------------------------------------------


def stale_temps(log: Path, data: Path) -> tuple[Path, Path, Path]:
    """Temp files a killed clean would leave: beside the log (two naming generations) and in
    the backup dir."""
    backup = backup_path_for(log, data)
    backup.parent.mkdir(parents=True, exist_ok=True)
    made = (
        log.parent / f".{log.name}.looprescue-999999-0a1b2c3d.tmp",
        log.parent / f".{log.name}.looprescue-999998.tmp",
        backup.parent / f".{backup.name}.looprescue-999997-deadbeef.tmp",
    )
    for path in made:
        path.write_bytes(log.read_bytes()[:1000])
    return made


@pytest.mark.parametrize("command", ["clean", "repair", "undo"])
def test_the_next_run_removes_temp_files_a_killed_run_left(tmp_path, command):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    if command == "undo":
        assert runner.invoke(app, ["clean", str(log), "--data", str(data), "--yes"]).exit_code == 0
    temps = stale_temps(log, data)
    unrelated = log.parent / "notes.tmp"
    unrelated.write_text("mine")
    args = {
        "clean": ["clean", log, "--data", data, "--yes"],
        "repair": ["repair", log, "--data", data, "--yes"],  # nothing to repair: still swept
        "undo": ["clean", "--undo", log, "--data", data, "--yes"],
    }[command]
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    assert not any(p.exists() for p in temps)
    assert "removed a temp file an interrupted run left behind" in result.stderr
    assert unrelated.read_text() == "mine"


def test_dry_runs_and_read_only_commands_leave_temp_files_alone(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    temps = stale_temps(log, data)
    for args in (["clean", log, "--data", data, "--dry-run"], ["scan", log], ["sessions"]):
        runner.invoke(app, [str(a) for a in args])
    assert all(p.exists() for p in temps)


def test_a_temp_file_of_a_live_process_is_kept_when_the_lock_is_not_ours(tmp_path):
    from looprescue.dsh import SessionLock
    from looprescue.dsh.writer import remove_stale_temps

    log = install_session(tmp_path / "sessions", "a_reasoning_loop")
    live = log.parent / f".{log.name}.looprescue-{os.getppid()}-00000000.tmp"  # pytest's parent
    dead = log.parent / f".{log.name}.looprescue-999999-00000000.tmp"
    live.touch()
    dead.touch()
    with SessionLock(log.parent):  # held by "DSH": an edit with --force may not sweep all
        assert remove_stale_temps(log, any_owner=False) == [dead]
    assert live.exists()


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_clean_repair_and_undo_keep_the_file_mode(tmp_path, mode):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    log.chmod(mode)
    assert runner.invoke(app, ["clean", str(log), "--data", str(data), "--yes"]).exit_code == 0
    assert log.stat().st_mode & 0o7777 == mode
    assert backup_path_for(log, data).stat().st_mode & 0o7777 == mode
    assert runner.invoke(app, ["clean", "--undo", str(log), "--yes"]).exit_code == 0
    assert log.stat().st_mode & 0o7777 == mode
    assert log.read_bytes() == fixture_log("a_reasoning_loop").read_bytes()

    torn = install_session(tmp_path / "other", "d_tool_loop")
    torn.write_bytes(torn.read_bytes()[:-10])
    torn.chmod(mode)
    result = runner.invoke(app, ["repair", str(torn), "--data", str(tmp_path / "other"), "--yes"])
    assert result.exit_code == 0, result.output
    assert torn.stat().st_mode & 0o7777 == mode


def test_an_undo_after_a_run_killed_between_the_two_backup_renames(tmp_path):
    # clean #1 made backup B1; clean #2 was killed after moving B1 aside and before putting
    # its own backup in place (its temp file is left): undo still finds B1.
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    original = log.read_bytes()
    assert runner.invoke(app, ["clean", str(log), "--data", str(data), "--yes"]).exit_code == 0
    backup = backup_path_for(log, data)
    backup.rename(backup.with_name(backup.name + ".20250101T000000"))
    (backup.parent / f".{backup.name}.looprescue-999999-00000001.tmp").write_bytes(b"partial")
    result = runner.invoke(app, ["clean", "--undo", str(log), "--data", str(data), "--yes"])
    assert result.exit_code == 0, result.output
    assert log.read_bytes() == original
    assert sorted(p.name for p in backup.parent.iterdir()) == []
