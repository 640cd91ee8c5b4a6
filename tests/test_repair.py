"""``looprescue repair`` on damaged copies of the real fixtures."""

from __future__ import annotations

import json

from tests.test_dsh_helpers import fixture_log, install_session, tree_state, write_frames
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh import open_log
from looprescue.dsh.closers import OpenTurnTracker
from looprescue.dsh.frames import iter_frames
from looprescue.dsh.lines import iter_lines
from looprescue.dsh.records import record_of

runner = CliRunner()


def repair(*args: object):
    return runner.invoke(app, ["repair", *map(str, args)])


def events(path):
    return list(open_log(path).events())


def test_torn_final_frame_is_cut_back_and_the_turn_closed(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "d_tool_loop")
    original = log.read_bytes()
    last = list(iter_frames(log))[-1]
    log.write_bytes(original[:-10])  # the final frame (4 lines) is torn
    result = repair(log, "--data", data, "--yes")
    assert result.exit_code == 0, result.output
    assert f"frame {last.index} at byte {last.offset} is torn" in result.stdout
    repaired = events(log)
    # Complete frames kept byte for byte.
    assert log.read_bytes()[: last.offset] == original[: last.offset]
    before = [
        json.loads(x)
        for x in fixture_log("d_tool_loop").with_suffix("").read_bytes().splitlines()[1:]
    ]
    kept = len(repaired) - 2
    assert repaired[:kept] == before[:kept]
    # DSH's closers: step/end and turn/end {interrupted}, at the last surviving event's time.
    closers = repaired[kept:]
    assert [c["type"] for c in closers] == ["step/end", "turn/end"]
    assert closers[1]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert {c["time"] for c in closers} == {repaired[kept - 1]["time"]}
    assert [e["seq"] for e in repaired] == list(range(len(repaired)))
    backup = tmp_path / "sessions-loop-rescue-backup" / log.relative_to(data)
    assert backup.read_bytes() == original[:-10]


def test_complete_lines_of_a_torn_frame_are_salvaged(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "d_tool_loop")
    log.write_bytes(log.read_bytes()[:-3])  # only the checksum of the final frame is cut
    result = repair(log, "--data", data, "--yes")
    assert result.exit_code == 0, result.output
    assert "salvage 4 complete line(s)" in result.stdout
    # The torn batch held the last 4 events, turn/end included: nothing is lost and no
    # closer is needed.
    assert "append closers" not in result.stdout
    assert events(log) == events(fixture_log("d_tool_loop"))


def test_open_tool_call_gets_an_interrupted_result(tmp_path):
    lines = fixture_log("d_tool_loop").with_suffix("").read_bytes().splitlines()
    # Keep through seq 19 (tool/call 18, job/registered 19): the call never got its result.
    path = tmp_path / "sessions" / "--p--" / "s" / "session.v4.jsonl.zstd"
    path.parent.mkdir(parents=True)
    write_frames(path, [lines[:1], lines[1:20], lines[20:21]])
    data = path.read_bytes()
    path.write_bytes(data[:-8])  # tear the frame holding seq 19
    result = repair(path, "--yes")
    assert result.exit_code == 0, result.output
    repaired = events(path)
    assert repaired[18]["type"] == "tool/call"
    result_event, step_end, turn_end = repaired[-3:]
    assert result_event["type"] == "tool/result"
    assert result_event["sourceEventSeqs"] == [18]
    assert result_event["surfaceOp"] == "append"
    call_id = repaired[18]["data"]["callId"]
    assert (
        result_event["data"]["message"]["id"]
        == f"interrupted-tool-result-{call_id}-{result_event['seq']}"
    )
    assert result_event["data"]["message"]["isError"] is True
    assert result_event["data"]["error"] == {
        "name": "ToolOutcomeUnknownError",
        "code": "TOOL_OUTCOME_UNKNOWN",
    }
    assert step_end["data"] == {"turn": 1, "step": 1}
    assert turn_end["data"]["reason"] == {"kind": "interrupted"}


def test_zero_filled_tail_is_a_corrupt_tail(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "a_reasoning_loop")
    last = list(iter_frames(log))[-1]
    log.write_bytes(log.read_bytes()[: last.offset] + b"\0" * 300)
    result = repair(log, "--data", data, "--yes")
    assert result.exit_code == 0, result.output
    assert "is corrupt and nothing intact follows" in result.stdout
    assert [e["type"] for e in events(log)[-2:]] == ["step/end", "turn/end"]


def test_truncated_last_line_of_a_plain_log(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "b_verbatim_cycle", plain=True)
    log.write_bytes(log.read_bytes()[:-40])
    result = repair(log, "--data", data, "--yes")
    assert result.exit_code == 0, result.output
    repaired = events(log)
    assert repaired[-1]["data"]["reason"] == {"kind": "interrupted"}
    assert open_log(log).encoding == "plain"
    assert len(repaired) == 20  # seq 19 (the cut turn/end) replaced by DSH's own closer


def test_damage_before_the_tail_is_reported_not_repaired(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "d_tool_loop")
    frames = list(iter_frames(log))
    raw = bytearray(log.read_bytes())
    raw[frames[5].offset + frames[5].size // 2] ^= 0xFF
    log.write_bytes(bytes(raw))
    state = tree_state(tmp_path)
    result = repair(log, "--data", data, "--yes")
    assert result.exit_code == 2
    assert "damage before the end of the log" in result.stderr
    assert f"{log}" in result.stderr and "frame 5" in result.stderr
    assert tree_state(tmp_path) == state


def test_invalid_line_inside_a_complete_frame_is_not_a_tail(tmp_path):
    lines = fixture_log("a_reasoning_loop").with_suffix("").read_bytes().splitlines()
    lines[-1] = lines[-1][:-5]
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:]])
    result = repair(path, "--yes")
    assert result.exit_code == 2
    assert "line 21" in result.stderr and "invalid JSON" in result.stderr


def test_intact_sessions_need_nothing(tmp_path):
    data = tmp_path / "sessions"
    for scenario in ("a_reasoning_loop", "h2_stream_interrupt_sigint"):
        log = install_session(data, scenario)
        state = tree_state(tmp_path)
        result = repair(log, "--data", data, "--yes")
        assert result.exit_code == 0
        assert "nothing to repair" in result.stdout
        assert tree_state(tmp_path) == state


def test_open_last_turn_without_damage_gets_closers(tmp_path):
    lines = fixture_log("a_reasoning_loop").with_suffix("").read_bytes().splitlines()
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:19]])
    result = repair(path, "--yes")
    assert result.exit_code == 0, result.output
    assert [e["type"] for e in events(path)[-3:]] == ["assistant/message", "step/end", "turn/end"]


def test_dry_run_writes_nothing(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "d_tool_loop")
    log.write_bytes(log.read_bytes()[:-10])
    state = tree_state(tmp_path)
    result = repair(log, "--data", data, "--dry-run")
    assert result.exit_code == 0
    assert "append closers" in result.stdout and "nothing was written" in result.stdout
    assert tree_state(tmp_path) == state


def test_repaired_file_keeps_dsh_frame_layout(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "d_tool_loop")
    log.write_bytes(log.read_bytes()[:-10])
    assert repair(log, "--data", data, "--yes").exit_code == 0
    frames = list(iter_frames(log))
    assert frames[0].content.count(b"\n") == 1
    assert all(f.complete and f.content.endswith(b"\n") for f in frames)
    assert sum(1 for _ in iter_lines(log, "zstd")) == len(events(log)) + 1


def test_closers_for_started_and_unstarted_tool_calls():
    tracker = OpenTurnTracker()
    message = {"content": [
        {"type": "tool-call", "id": "call_a", "name": "bash", "arguments": "{}"},
        {"type": "tool-call", "id": "call_b", "name": "read", "arguments": "{}"},
        {"type": "tool-call", "id": "call_c", "name": "read", "arguments": "{}"},
    ]}  # fmt: skip
    for event in [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 2}},
        {"type": "step/start", "seq": 1, "time": 2, "data": {"turn": 2, "step": 3}},
        {"type": "assistant/message", "seq": 2, "time": 3,
         "data": {"turn": 2, "step": 3, "message": message}},
        {"type": "tool/call", "seq": 3, "time": 4, "data": {"callId": "call_a", "name": "bash"}},
        {"type": "tool/call", "seq": 4, "time": 5, "data": {"callId": "call_b", "name": "read"}},
        {"type": "tool/result", "seq": 5, "time": 6, "data": {"message": {"toolCallId": "call_b"}}},
    ]:  # fmt: skip
        tracker.observe(record_of(event))
    closers = tracker.closers()
    assert [(c["type"], c["seq"], c["time"]) for c in closers] == [
        ("tool/result", 6, 6), ("tool/result", 7, 6), ("step/end", 8, 6), ("turn/end", 9, 6)
    ]  # fmt: skip
    started, unstarted = closers[0], closers[1]
    assert started["sourceEventSeqs"] == [3]
    assert started["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert started["data"]["message"]["id"] == "interrupted-tool-result-call_a-6"
    assert "sourceEventSeqs" not in unstarted
    assert unstarted["data"]["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert closers[2]["data"] == {"turn": 2, "step": 3}
    tracker.observe(record_of(closers[-1]))
    assert tracker.closers() == []


def test_legacy_logs_are_read_only(tmp_path):
    rows = [
        {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0},
        {"type": "turn/start", "seq": 0, "time": 10, "data": {"turn": 1}},
    ]
    session_dir = tmp_path / "sessions" / "--p--" / "s"
    session_dir.mkdir(parents=True)
    log = session_dir / "session.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    state = tree_state(tmp_path)
    for command in ("repair", "clean"):
        result = runner.invoke(app, [command, str(log), "--yes"])
        assert result.exit_code == 2
        assert "legacy version-0 logs are read-only" in result.stderr
    assert tree_state(tmp_path) == state  # not even a session.lock was created
