"""`looprescue doctor` end to end: real fixtures, real files, a real follower process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from tests.paths import SESSIONS
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh.frames import compress_frame

runner = CliRunner()


def doctor(*args: str):
    return runner.invoke(app, ["doctor", *args])


def json_lines(output: str) -> list[dict]:
    return [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_json_one_object_per_signal_and_exit_1() -> None:
    result = doctor(str(SESSIONS / "d_tool_loop"), "--json")
    assert result.exit_code == 1
    (line,) = json_lines(result.stdout)
    assert line["kind"] == "retry-storm" and line["sub"] == "repeat:bash"
    assert line["turn"] == 1 and line["metric"] == 6
    assert line["evidence"] == [18, 26, 34, 45, 53, 64]
    assert line["path"].endswith("d_tool_loop/session/session.v4.jsonl.zstd")


def test_whole_fixture_dir() -> None:
    result = doctor(str(SESSIONS), "--json")
    assert result.exit_code == 1
    found = [(s["kind"], s["sub"], s["turn"], s["metric"]) for s in json_lines(result.stdout)]
    assert found == [  # scenario order
        ("retry-storm", "repeat:bash", 1, 6),
        ("tool-misuse", "read", 2, 2),
        ("retry-storm", None, 1, 2),
        ("context-thrash", "compaction", None, 4),
    ]


def test_table_names_kind_turn_metric_and_evidence() -> None:
    result = doctor(str(SESSIONS / "f_retry_storm"), str(SESSIONS / "g_healthy_long_answer"))
    assert result.exit_code == 1
    assert "retry-storm" in result.stdout and "14, 15, 19, 20" in result.stdout
    assert "no detours" in result.stdout  # g's line


def test_healthy_sessions_exit_0() -> None:
    result = doctor(str(SESSIONS / "g_healthy_long_answer"), str(SESSIONS / "k_python_sdk_run"))
    assert result.exit_code == 0
    assert result.stdout.count("no detours") == 2


def test_config_thresholds_apply_and_bad_values_fail_naming_the_key(tmp_path: Path) -> None:
    strict = tmp_path / "strict.yaml"
    strict.write_text("doctor:\n  retryStormMin: 1\n")
    result = doctor(str(SESSIONS / "h_stream_cut"), "--json", "--config", str(strict))
    assert result.exit_code == 1
    assert [s["kind"] for s in json_lines(result.stdout)] == ["retry-storm"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("doctor:\n  retryStormMin: 0\n")
    result = doctor(str(SESSIONS / "h_stream_cut"), "--config", str(bad))
    assert result.exit_code == 2
    assert "doctor.retryStormMin" in result.stderr


def test_unreadable_input_exit_2_naming_the_file(tmp_path: Path) -> None:
    result = doctor(str(tmp_path / "absent"))
    assert result.exit_code == 2 and "absent" in result.stderr

    good = tmp_path / "good"
    shutil.copytree(SESSIONS / "d_tool_loop" / "session", good)
    broken = tmp_path / "broken"
    shutil.copytree(SESSIONS / "g_healthy_long_answer" / "session", broken)
    (broken / "session.v4.jsonl").unlink()
    log = broken / "session.v4.jsonl.zstd"
    data = bytearray(log.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
    log.write_bytes(bytes(data))
    result = doctor(str(tmp_path), "--json")
    assert result.exit_code == 2
    assert str(log) in result.stderr
    records = json_lines(result.stdout)
    (error,) = [r for r in records if r["kind"] == "error"]
    assert error["path"] == str(log) and error["frame"] is not None
    # the readable session is still reported
    assert [r["sub"] for r in records if r["kind"] != "error"] == ["repeat:bash"]


def test_no_path_means_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "sessions"
    shutil.copytree(SESSIONS / "f_retry_storm" / "session", data / "--home-ana-proj--" / "s1")
    result = doctor("--json", "--data", str(data))
    assert result.exit_code == 1
    assert [r["kind"] for r in json_lines(result.stdout)] == ["retry-storm"]
    result = runner.invoke(app, ["doctor"], env={"DSH_HOME": str(tmp_path)})
    assert result.exit_code == 1 and "retry-storm" in result.stdout
    result = runner.invoke(app, ["doctor"], env={"DSH_HOME": str(tmp_path / "empty")})
    assert result.exit_code == 2 and "empty" in result.stderr


def test_paths_and_follow_are_exclusive() -> None:
    result = doctor(str(SESSIONS / "d_tool_loop"), "--follow", str(SESSIONS / "d_tool_loop"))
    assert result.exit_code == 2


def test_follow_needs_exactly_one_session() -> None:
    result = doctor("--follow", str(SESSIONS / "i_subagent"))
    assert result.exit_code == 2 and "found 2" in result.stderr


# -- a real follower process ---------------------------------------------------------------------


def fixture_lines(scenario: str) -> list[bytes]:
    text = (SESSIONS / scenario / "session" / "session.v4.jsonl").read_bytes()
    return text.splitlines(keepends=True)


def start_follower(path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            *(sys.executable, "-c", "from looprescue.cli import main; main()", "doctor"),
            *("--follow", str(path), "--json", "--interval", "0.02"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def read_until(stream, needle: str) -> list[str]:
    seen = []
    while True:
        line = stream.readline().decode()
        assert line, f"stream closed before {needle!r}; saw {seen}"
        seen.append(line)
        if needle in line:
            return seen


@pytest.mark.timeout(120)
def test_follow_reports_turns_as_dsh_appends_frames_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    lines = fixture_lines("d_tool_loop")
    log = tmp_path / "session.v4.jsonl.zstd"
    log.write_bytes(compress_frame(lines[0]))
    follower = start_follower(log)
    try:
        read_until(follower.stderr, "following")
        body = lines[1:]
        with open(log, "ab") as fh:
            for start in range(0, len(body), 4):
                frame = compress_frame(b"".join(body[start : start + 4]))
                fh.write(frame[:7])  # a torn append the follower must wait out
                fh.flush()
                fh.write(frame[7:])
                fh.flush()
        (signal_line,) = read_until(follower.stdout, "repeat:bash")
        assert orjson.loads(signal_line)["evidence"] == [18, 26, 34, 45, 53, 64]

        # rotate: the session is replaced by another log; reported, not crashed on
        replacement = tmp_path / "replacement.tmp"
        i2 = fixture_lines("i2_compaction")
        replacement.write_bytes(compress_frame(i2[0]) + compress_frame(b"".join(i2[1:])))
        os.replace(replacement, log)
        read_until(follower.stderr, "rotated")
    finally:
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 1
    # the session-level signal of the new log is printed when following stops
    (thrash,) = json_lines(out.decode())
    assert (thrash["kind"], thrash["sub"], thrash["metric"]) == ("context-thrash", "compaction", 4)
    assert "stopped" in err.decode() and "Traceback" not in err.decode()


@pytest.mark.timeout(120)
def test_follow_a_quiet_session_exits_0_on_ctrl_c(tmp_path: Path) -> None:
    lines = fixture_lines("g_healthy_long_answer")
    log = tmp_path / "session.v4.jsonl.zstd"
    log.write_bytes(compress_frame(lines[0]) + compress_frame(b"".join(lines[1:])))
    follower = start_follower(log)
    try:
        read_until(follower.stderr, "session session-")  # the header has been read
        with open(log, "r+b") as fh:
            fh.truncate(10)  # cut to the middle of the header frame
        read_until(follower.stderr, "truncated")
    finally:
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert out == b""


@pytest.mark.timeout(120)
def test_follow_survives_a_directory_and_stops_at_an_appended_seq_gap(tmp_path: Path) -> None:
    lines = fixture_lines("d_tool_loop")
    log = tmp_path / "session.v4.jsonl.zstd"
    log.write_bytes(compress_frame(lines[0]) + compress_frame(b"".join(lines[1:5])))
    follower = start_follower(log)
    try:
        read_until(follower.stderr, "session session-")
        log.unlink()
        log.mkdir()  # replaced by a directory: said once, then waited out
        read_until(follower.stderr, "session log is a directory")
        log.rmdir()
        log.write_bytes(compress_frame(lines[0]) + compress_frame(b"".join(lines[1:5])))
        read_until(follower.stderr, "reappeared")
        with open(log, "ab") as fh:
            fh.write(compress_frame(b"".join(lines[6:8])))  # seq 4 never written
        _out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 2
    assert f"error: {log}: seq gap (expected 4, got 5) (frame 2" in err.decode()
    assert "Traceback" not in err.decode()


def test_torn_tail_is_read_up_to_the_last_complete_frame(tmp_path: Path) -> None:
    session = tmp_path / "session"
    shutil.copytree(SESSIONS / "d_tool_loop" / "session", session)
    (session / "session.v4.jsonl").unlink()
    frame = compress_frame(b'{"type":"step/start","seq":74,"time":1,"data":{"turn":2,"step":1}}\n')
    with open(session / "session.v4.jsonl.zstd", "ab") as fh:
        fh.write(frame[: len(frame) - 3])  # DSH crashed during this append
    result = doctor(str(session), "--json")
    assert result.exit_code == 1
    assert [s["sub"] for s in json_lines(result.stdout)] == ["repeat:bash"]
    assert "note:" in result.stderr
