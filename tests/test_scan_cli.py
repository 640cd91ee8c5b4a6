"""``looprescue scan`` and ``looprescue sessions`` end to end on the fixtures."""

from __future__ import annotations

import json
import shutil

from tests.paths import SESSIONS
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh import SessionLock

runner = CliRunner()


def scan(*args: str):
    return runner.invoke(app, ["scan", *map(str, args)])


def test_scan_data_dir_exit_1_and_one_line_per_hit():
    result = scan(SESSIONS)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    a_line = next(x for x in lines if x.startswith("session-52b2090c"))
    for part in (
        "t1s1",
        "seq 17",
        "reasoning",
        "cycle",
        "loop chars",
        "cut at 307/5107",  # before the first "Now." of the rotation
        "Now. OK.",
    ):
        assert part in a_line
    assert not any("session-be6d8122" in x for x in lines)  # k: healthy
    assert sum("narration" in x for x in lines) == 1  # i2: same answer in three turns


def test_scan_healthy_session_exit_0_and_silent():
    result = scan(SESSIONS / "g_healthy_long_answer" / "session")
    assert result.exit_code == 0 and result.stdout == ""


def test_scan_all_adds_misses():
    result = scan("--all", SESSIONS / "g_healthy_long_answer" / "session")
    assert result.exit_code == 0
    assert [x.split("  ")[-2] for x in result.stdout.splitlines()] == ["ok", "ok"]


def test_scan_json_lines():
    result = scan("--json", SESSIONS / "b_verbatim_cycle" / "session" / "session.v4.jsonl.zstd")
    assert result.exit_code == 1
    [record] = [json.loads(x) for x in result.stdout.splitlines()]
    assert record["kind"] == "loop" and record["period"] == 121 and record["channel"] == "text"
    assert record["session"].startswith("session-d71e2eed")


def test_scan_unreadable_input_exit_2_other_sessions_still_scanned(tmp_path):
    good = tmp_path / "b"
    shutil.copytree(SESSIONS / "b_verbatim_cycle" / "session", good)
    bad = tmp_path / "a" / "session.v4.jsonl.zstd"
    bad.parent.mkdir()
    data = (SESSIONS / "a_reasoning_loop" / "session" / "session.v4.jsonl.zstd").read_bytes()
    bad.write_bytes(data[:200] + b"\0" * 50 + data[250:])
    result = scan(tmp_path)
    assert result.exit_code == 2
    assert "session-d71e2eed" in result.stdout
    assert f"error: {bad}" in result.stderr and "frame" in result.stderr


def test_scan_empty_dir_exit_2(tmp_path):
    result = scan(tmp_path)
    assert result.exit_code == 2
    assert f"error: {tmp_path}: no DSH session logs" in result.stderr


def test_sessions_json_listing():
    result = runner.invoke(app, ["sessions", "--data", str(SESSIONS), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in result.stdout.splitlines()]
    assert len(rows) == 13
    times = [r["lastEventTime"] for r in rows]
    assert times == sorted(times, reverse=True)
    i2 = next(r for r in rows if r["id"].startswith("session-60ad4438"))
    assert i2["turns"] == 3 and i2["title"] == "Say something short" and not i2["lockedByDsh"]
    assert i2["cwd"] == "/tmp/looprescue-dsh-record/proj"


def test_sessions_table_shows_project_decoded_from_key(tmp_path):
    session_dir = tmp_path / "sessions" / "--home-My~0020Proj--" / "s1"
    shutil.copytree(SESSIONS / "g_healthy_long_answer" / "session", session_dir)
    result = runner.invoke(app, ["sessions", "--data", str(tmp_path / "sessions")])
    assert result.exit_code == 0
    assert "home-My Proj" in result.stdout and "Compare the retry modes and" in result.stdout


def test_sessions_uses_dsh_home(tmp_path, monkeypatch):
    shutil.copytree(
        SESSIONS / "k_python_sdk_run" / "session", tmp_path / "sessions" / "--p--" / "x"
    )
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    result = runner.invoke(app, ["sessions", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["id"] == "session-be6d81223a03400ab327fe0ad1c48643"


def test_sessions_shows_a_session_dsh_holds(tmp_path):
    session_dir = tmp_path / "sessions" / "--p--" / "s1"
    shutil.copytree(SESSIONS / "g_healthy_long_answer" / "session", session_dir)
    with SessionLock(session_dir):
        held = runner.invoke(app, ["sessions", "--data", str(tmp_path / "sessions"), "--json"])
        table = runner.invoke(app, ["sessions", "--data", str(tmp_path / "sessions")])
    assert json.loads(held.stdout)["lockedByDsh"] is True
    assert "open" in table.stdout
    free = runner.invoke(app, ["sessions", "--data", str(tmp_path / "sessions"), "--json"])
    assert json.loads(free.stdout)["lockedByDsh"] is False
