"""Bad input for scan, clean, repair and sessions, built from damaged copies of the real
fixtures: one clear message naming the file (and line/frame), exit code 2, nothing written."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.test_dsh_helpers import install_session, tree_state, write_frames
from typer.testing import CliRunner

import looprescue.commands.clean as clean_module
import looprescue.commands.scan as scan_module
from looprescue.cli import app
from looprescue.dsh.frames import iter_frames

runner = CliRunner()


def run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def plain_lines(log: Path) -> list[bytes]:
    import zstandard

    with log.open("rb") as fh:
        reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
        return reader.read().splitlines()


def rewrite(log: Path, lines: list[bytes]) -> None:
    write_frames(log, [lines[:1], lines[1:10], lines[10:]])


def corrupt_middle_frame(log: Path) -> str:
    frame = list(iter_frames(log))[3]
    raw = bytearray(log.read_bytes())
    raw[frame.offset + frame.size // 2] ^= 0xFF
    log.write_bytes(bytes(raw))
    return f"frame 3, byte {frame.offset}"


def torn_frame(log: Path) -> str:
    frame = list(iter_frames(log))[-1]
    log.write_bytes(log.read_bytes()[:-10])
    return f"frame {frame.index}, byte {frame.offset}"


def invalid_json(log: Path) -> str:
    lines = plain_lines(log)
    lines[12] = lines[12][:40]
    rewrite(log, lines)
    return "frame 2, byte"


def wrong_header_version(log: Path) -> str:
    lines = plain_lines(log)
    header = json.loads(lines[0])
    header["version"] = 5
    lines[0] = json.dumps(header, separators=(",", ":")).encode()
    rewrite(log, lines)
    return "line 1"


def seq_gap(log: Path) -> str:
    lines = plain_lines(log)
    del lines[8]
    rewrite(log, lines)
    return "line 9"


DAMAGE = {
    "corrupt zstd": (corrupt_middle_frame, "corrupt zstd frame 3"),
    "torn frame": (torn_frame, "file ends inside frame"),
    "invalid JSON": (invalid_json, "invalid JSON"),
    "wrong header version": (wrong_header_version, "unsupported header version 5"),
    "non-contiguous seq": (seq_gap, "seq gap (expected 7, got 8)"),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
@pytest.mark.parametrize("command", ["scan", "clean", "sessions"])
def test_damaged_log_gives_one_clear_error(tmp_path, damage, command):
    if command == "sessions" and damage == "torn frame":
        return _sessions_lists_a_torn_log_with_a_note(tmp_path)
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    make_damage, reason = DAMAGE[damage]
    where = make_damage(log)
    state = tree_state(tmp_path)
    if command == "scan":
        result = run("scan", log)
    elif command == "clean":
        result = run("clean", log, "--data", data, "--yes")
    else:
        result = run("sessions", "--data", data)
    assert result.exit_code == 2, result.output
    errors = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"error: {log}: ")
    assert reason in errors[0] and where in errors[0]
    assert tree_state(tmp_path) == state


@pytest.mark.parametrize(
    "damage", ["corrupt zstd", "invalid JSON", "wrong header version", "non-contiguous seq"]
)
def test_repair_refuses_damage_that_is_not_a_torn_tail(tmp_path, damage):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    make_damage, reason = DAMAGE[damage]
    make_damage(log)
    state = tree_state(tmp_path)
    result = run("repair", log, "--data", data, "--yes")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {log}: ")
    assert reason in result.stderr and "nothing was written" in result.stderr
    assert tree_state(tmp_path) == state


def _sessions_lists_a_torn_log_with_a_note(tmp_path):
    # DSH itself opens a log with a torn tail (it drops the partial frame), so the listing
    # shows the session and notes the damage rather than failing.
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    torn_frame(log)
    result = run("sessions", "--data", data, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["damage"].startswith(f"{log}: file ends inside frame 6")
    assert f"note: {log}: file ends inside frame 6" in result.stderr


def test_clean_of_a_torn_log_points_to_repair(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    torn_frame(log)
    result = run("clean", log, "--data", data, "--yes")
    assert result.exit_code == 2 and "looprescue repair" in result.stderr


@pytest.mark.parametrize("command", ["scan", "sessions", "clean"])
def test_directory_without_sessions(tmp_path, command):
    (tmp_path / "sessions" / "--p--" / "empty").mkdir(parents=True)
    args = {
        "scan": ["scan", tmp_path / "sessions"],
        "sessions": ["sessions", "--data", tmp_path / "sessions"],
        "clean": ["clean", "--data", tmp_path / "sessions", "--yes"],
    }[command]
    result = run(*args)
    assert result.exit_code == 2
    assert f"{tmp_path / 'sessions'}: no DSH session logs in this directory" in result.stderr


def test_missing_session_argument(tmp_path):
    result = run("clean", tmp_path / "nope", "--data", tmp_path, "--yes")
    assert result.exit_code == 2 and "no session" in result.stderr
    result = run("repair", "session-does-not-exist", "--data", tmp_path, "--yes")
    assert result.exit_code == 2 and "no session 'session-does-not-exist'" in result.stderr


def test_session_vanishing_during_a_scan(tmp_path, monkeypatch):
    data = tmp_path / "sessions"
    gone = install_session(data, "a_reasoning_loop")
    install_session(data, "b_verbatim_cycle")
    real = scan_module.session_logs

    def listing_then_vanish(refs, data_dir):
        logs = real(refs, data_dir)
        shutil.rmtree(gone.parent)  # deleted after it was listed, before it is read
        return logs

    monkeypatch.setattr(scan_module, "session_logs", listing_then_vanish)
    result = run("scan", data)
    assert result.exit_code == 2
    assert f"error: {gone}: file not found" in result.stderr
    assert "session-d71e2eed" in result.stdout  # the other session was still scanned


def test_session_vanishing_during_a_clean(tmp_path, monkeypatch):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    real = clean_module.plan_clean

    def plan_then_vanish(*args, **kwargs):
        plan = real(*args, **kwargs)
        log.unlink()
        return plan

    monkeypatch.setattr(clean_module, "plan_clean", plan_then_vanish)
    result = run("clean", log, "--data", data, "--yes")
    assert result.exit_code == 2
    assert f"error: {log}: file vanished" in result.stderr
    assert not (tmp_path / "sessions-loop-rescue-backup").exists()
    assert sorted(p.name for p in log.parent.iterdir()) == ["session.lock"]


def _drop_dac_capabilities() -> None:
    # PR_CAPBSET_DROP of CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2): after exec, root
    # is bound by permission bits like any other user.
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _run_cli_without_permission(args: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI in a child process that is denied access to a chmod-000 file. Tests run
    as root, which ignores permission bits through its DAC capabilities, so as root the
    child drops those two capabilities before exec (it stays uid 0, so the interpreter and
    everything else owned by root remain reachable); as another user chmod 000 suffices."""
    command = [sys.executable, "-c", "from looprescue.cli import main; main()", *args]
    preexec = _drop_dac_capabilities if os.geteuid() == 0 else None
    return subprocess.run(command, capture_output=True, text=True, preexec_fn=preexec, timeout=120)


@pytest.mark.parametrize("command", ["scan", "clean", "repair"])
def test_no_permission(tmp_path, command):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle")
    log.chmod(0)
    state = tree_state(tmp_path)
    args = {
        "scan": ["scan", str(log)],
        "clean": ["clean", str(log), "--data", str(data), "--yes"],
        "repair": ["repair", str(log), "--data", str(data), "--yes"],
    }[command]
    result = _run_cli_without_permission(args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error: {log}: permission denied" in result.stderr
    assert tree_state(tmp_path) == state
    assert not (tmp_path / "sessions-loop-rescue-backup").exists()
