"""A field of the wrong type, through every offline command: a format error naming the file,
frame, line and field (exit 2, nothing written) where DSH refuses such a log, or a warning
and the field's part skipped where DSH tolerates it (FORMAT.md §6.5: the stream is log-only)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.paths import SESSIONS
from tests.test_dsh_helpers import install_session, tree_state
from typer.testing import CliRunner

from looprescue.cli import app
from looprescue.dsh import open_log
from looprescue.dsh.decoder import compress_frame
from looprescue.dsh.frames import iter_frames
from looprescue.dsh.records import record_of
from looprescue.dsh.views import FieldProblem

runner = CliRunner()
COMMANDS = {
    "scan": lambda log, data: ["scan", log],
    "doctor": lambda log, data: ["doctor", log],
    "sessions": lambda log, data: ["sessions", "--data", data],
    "clean --dry-run": lambda log, data: ["clean", log, "--data", data, "--dry-run"],
    "clean --yes": lambda log, data: ["clean", log, "--data", data, "--yes"],
    "repair --dry-run": lambda log, data: ["repair", log, "--data", data, "--dry-run"],
    "repair --yes": lambda log, data: ["repair", log, "--data", data, "--yes"],
}


def edit_event(log: Path, seq: int, change: Callable[[dict], None]) -> int:
    """Change event ``seq`` in place, keeping DSH's frames (only its frame is re-encoded);
    returns the index of that frame."""
    frames = list(iter_frames(log))
    out, number, where = [], 0, -1
    for frame in frames:
        lines = frame.content.splitlines(keepends=True)
        for i, line in enumerate(lines):
            if number + i == seq + 1:  # line 1 (index 0) is the header
                event = json.loads(line)
                change(event)
                lines[i] = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
                lines[i] += b"\n"
                where = frame.index
        number += len(lines)
        out.append(compress_frame(b"".join(lines)))
    log.write_bytes(b"".join(out))
    return where


def block(i):
    return lambda e: e["data"]["message"]["content"][i]


def stream(i):
    return lambda e: e["data"]["stream"][i]


def unpacked_delta(**fields):
    def change(e):
        chunk = {"type": "reasoning-delta", **fields}
        e["data"]["stream"].insert(1, {"type": "chunk", "time": 1, "chunk": chunk})

    return change


# name: (scenario, seq, change, field named in the message)
REFUSED = {
    "content block type a list": (
        "a_reasoning_loop", 17, lambda e: block(0)(e).update(type=["reasoning"]),
        "data.message.content[0].type must be a string, got a list",
    ),
    "tool-call id a list": (
        "d_tool_loop", 17, lambda e: block(1)(e).update(id=["x"]),
        "data.message.content[1].id must be a string, got a list",
    ),
    "tool/call callId a list": (
        "d_tool_loop", 18, lambda e: e["data"].update(callId=["x"]),
        "data.callId must be a string, got a list",
    ),
    "tool/result toolCallId a list": (
        "d_tool_loop", 21, lambda e: e["data"]["message"].update(toolCallId=["x"]),
        "data.message.toolCallId must be a string, got a list",
    ),
    "tool/result message a string": (
        "d_tool_loop", 21, lambda e: e["data"].update(message="x"),
        "data.message must be an object, got a string",
    ),
    "turn a boolean": (
        "a_reasoning_loop", 4, lambda e: e["data"].update(turn=True),
        "data.turn must be an integer, got a boolean",
    ),
}  # fmt: skip
TOLERATED = {
    "chunk without time": (
        "a_reasoning_loop", 17, lambda e: stream(0)(e).pop("time"),
        "data.stream[0]: a chunk entry needs a numeric 'time'",
    ),
    "delta without index": (
        "a_reasoning_loop", 17, unpacked_delta(text="x"),
        "data.stream[1].chunk: a reasoning-delta chunk needs an integer 'index'",
    ),
    "delta index [0]": (
        "a_reasoning_loop", 17, unpacked_delta(index=[0], text="x"),
        "data.stream[1].chunk.index must be an integer, got a list",
    ),
    "delta text a number": (
        "a_reasoning_loop", 17, unpacked_delta(index=0, text=5),
        "data.stream[1].chunk.text must be a string, got an integer",
    ),
    "packed delta text a number": (
        "a_reasoning_loop", 17, lambda e: stream(1)(e)["texts"].__setitem__(3, 5),
        "data.stream[1].texts[3] must be a string, got an integer",
    ),
    "block-end without block": (
        "a_reasoning_loop", 17, lambda e: stream(2)(e)["chunk"].pop("block"),
        "data.stream[2].chunk: a block-end chunk needs the assembled 'block'",
    ),
    "packed time0 a string": (
        "a_reasoning_loop", 17, lambda e: stream(1)(e).update(time0="0"),
        "data.stream[1].time0 must be a number, got a string",
    ),
    "packed dt a string": (
        "a_reasoning_loop", 17, lambda e: stream(1)(e)["dt"].__setitem__(0, "1"),
        "data.stream[1].dt[0] must be a number, got a string",
    ),
}  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", REFUSED)
def test_a_wrong_type_where_dsh_refuses_is_an_error_naming_file_frame_line_and_field(
    tmp_path, case, command
):
    scenario, seq, change, field = REFUSED[case]
    data = tmp_path / "sessions"
    log = install_session(data, scenario)
    frame = edit_event(log, seq, change)
    state = tree_state(tmp_path)
    result = runner.invoke(app, [str(a) for a in COMMANDS[command](log, data)])
    assert result.exit_code == 2, result.output
    [error] = [x for x in result.stderr.splitlines() if x.startswith("error:")]
    assert error.startswith(f"error: {log}: ")
    assert field in error
    assert f"frame {frame}, " in error and f"line {seq + 2})" in error
    assert f"last good seq {seq - 1}" in error
    assert tree_state(tmp_path) == state


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case", TOLERATED)
def test_a_wrong_type_in_the_log_only_stream_is_a_warning_and_the_stream_is_skipped(
    tmp_path, case, command
):
    scenario, seq, change, field = TOLERATED[case]
    data = tmp_path / "sessions"
    log = install_session(data, scenario)
    frame = edit_event(log, seq, change)
    state = tree_state(tmp_path)
    result = runner.invoke(app, [str(a) for a in COMMANDS[command](log, data)])
    # the loop is in the message content, which DSH replays and scan reads: still found
    assert result.exit_code == (1 if command == "scan" else 0), result.output
    warnings = [x for x in result.stderr.splitlines() if x.startswith("warning:")]
    assert warnings[0].startswith(f"warning: {log}: frame {frame}, line {seq + 2}: ")
    assert field in warnings[0] and "the stream is ignored" in warnings[0]
    if command == "clean --yes" or command == "clean --dry-run":
        # cutting the content would leave a stream that cannot be rewritten to match
        assert f"warning: {log}: seq {seq} (line {seq + 2}): its data.stream is unreadable" in (
            result.stderr
        )
    assert tree_state(tmp_path) == state  # nothing to repair, nothing clean can edit


def test_a_log_only_event_with_a_bad_field_is_skipped_with_a_warning(tmp_path):
    data = tmp_path / "sessions"
    log = install_session(data, "f_retry_storm")
    edit_event(log, 14, lambda e: stream(0)(e).update(time="late"))
    for command in ("scan", "doctor", "sessions"):
        result = runner.invoke(app, [str(a) for a in COMMANDS[command](log, data)])
        assert result.exit_code in (0, 1), result.output
        assert "assistant/attempt (seq 14): data.stream[0].time must be a number" in result.stderr
        assert "event skipped (log-only, not replayed)" in result.stderr
    events = list(open_log(log).events())
    assert 14 not in [e["seq"] for e in events] and len(events) == 25  # of 26


def test_views_of_every_fixture_event_check():
    for path in sorted(SESSIONS.glob("*/session*/session.v4.jsonl.zstd")):
        log = open_log(path)
        records = list(log.records())
        assert log.warnings == [] and not any(r.skipped for r in records)
        kinds = {type(r.view).__name__ for r in records if r.view is not None}
        assert {"TurnStart", "Step", "AssistantMessage"} <= kinds


def test_record_of_an_in_memory_event_uses_the_same_views():
    with pytest.raises(FieldProblem, match=r"data.step must be an integer, got a string"):
        record_of({"type": "step/start", "seq": 0, "time": 1, "data": {"turn": 1, "step": "1"}})
    record = record_of({"type": "permission/preset", "seq": 0, "time": 1, "data": 5})
    assert record.view is None and not record.skipped  # a type looprescue does not read
