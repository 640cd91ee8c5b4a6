"""The session-log reader against the real DSH 0.2.1 fixtures and damaged copies of them."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import pytest
import zstandard
from tests.paths import SESSIONS

from looprescue.dsh import (
    SessionAccessError,
    SessionFormatError,
    TornTailError,
    expand_stream,
    open_log,
)
from looprescue.dsh.frames import compress_frame, iter_frames

ALL_LOGS = sorted(SESSIONS.glob("*/session*/session.v4.jsonl.zstd"))
A_LOG = SESSIONS / "a_reasoning_loop" / "session" / "session.v4.jsonl.zstd"


def plain_lines(zstd_path: Path) -> list[bytes]:
    return zstd_path.with_suffix("").read_bytes().splitlines()


def write_frames(path: Path, batches: list[list[bytes]]) -> Path:
    path.write_bytes(b"".join(compress_frame(b"".join(x + b"\n" for x in b)) for b in batches))
    return path


def test_fixture_set_is_complete():
    assert len(ALL_LOGS) == 13


@pytest.mark.parametrize("log_path", ALL_LOGS, ids=lambda p: p.parent.parent.name)
def test_zstd_and_plain_copies_read_identically(log_path):
    zlog = open_log(log_path)
    plog = open_log(log_path.with_suffix(""))
    assert zlog.encoding == "zstd" and plog.encoding == "plain"
    assert zlog.header == plog.header
    assert zlog.header["version"] == 4
    events = list(zlog.events())
    assert events == list(plog.events())
    assert [e["seq"] for e in events] == list(range(len(events)))
    expected = [json.loads(x) for x in plain_lines(log_path)[1:]]
    assert events == expected
    assert zlog.warnings == []


def test_frames_follow_dsh_batching():
    frames = list(iter_frames(A_LOG))
    assert [f.content.count(b"\n") for f in frames] == [1, 3, 3, 6, 2, 3, 3]
    assert all(f.complete for f in frames)
    assert frames[0].offset == 0
    for before, after in itertools.pairwise(frames):
        assert after.offset == before.offset + before.size
    assert frames[-1].offset + frames[-1].size == A_LOG.stat().st_size


def test_packed_reasoning_expands_to_the_block_text():
    message = next(e for e in open_log(A_LOG).events() if e["type"] == "assistant/message")
    stream = message["data"]["stream"]
    chunks = [c for _t, c in expand_stream(stream)]
    deltas = [c["text"] for c in chunks if c["type"] == "reasoning-delta"]
    assert len(deltas) == 862
    reasoning = message["data"]["message"]["content"][0]
    assert reasoning["type"] == "reasoning"
    assert "".join(deltas) == reasoning["text"]
    block_end = next(c for c in chunks if c["type"] == "block-end" and c["index"] == 0)
    assert block_end["block"] == reasoning


def test_packed_row_times_are_cumulative():
    stream = [
        {"type": "text-chunks", "time0": 100, "index": 1, "dt": [2, 3], "texts": ["a", "b", "c"]}
    ]
    assert [(t, c["text"]) for t, c in expand_stream(stream)] == [
        (100, "a"),
        (102, "b"),
        (105, "c"),
    ]


# --- damaged copies ---------------------------------------------------------------------------


def copy_fixture(tmp_path: Path, scenario: str = "a_reasoning_loop") -> Path:
    dest = tmp_path / scenario
    shutil.copytree(SESSIONS / scenario / "session", dest)
    for p in dest.iterdir():
        p.chmod(0o600)
    return dest / "session.v4.jsonl.zstd"


def test_torn_last_frame_is_reported_with_frame_offset_and_last_good_seq(tmp_path):
    path = copy_fixture(tmp_path)
    frames = list(iter_frames(path))
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    log = open_log(path)
    with pytest.raises(TornTailError) as info:
        list(log.events())
    err = info.value
    assert err.frame == 6
    assert err.offset == frames[6].offset
    assert err.last_good_seq == 16
    assert str(path) in str(err) and "frame 6" in str(err) and "last good seq 16" in str(err)
    tolerant = list(log.events(tolerate_torn_tail=True))
    assert [e["seq"] for e in tolerant] == list(range(17))
    assert log.torn_tail is not None


def test_corrupt_block_in_a_middle_frame(tmp_path):
    path = copy_fixture(tmp_path)
    frames = list(iter_frames(path))
    data = bytearray(path.read_bytes())
    target = frames[3]
    data[target.offset + target.size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(SessionFormatError) as info:
        list(open_log(path).events())
    err = info.value
    assert not isinstance(err, TornTailError)
    assert err.frame == 3 and err.offset == target.offset
    assert err.last_good_seq == 5
    assert "corrupt zstd frame 3" in str(err)


def test_garbage_between_frames_is_invalid_magic(tmp_path):
    path = copy_fixture(tmp_path)
    frames = list(iter_frames(path))
    data = path.read_bytes()
    cut = frames[2].offset
    path.write_bytes(data[:cut] + b"not a frame at all" + data[cut:])
    with pytest.raises(SessionFormatError) as info:
        list(open_log(path).events())
    assert info.value.frame == 2
    assert f"invalid frame magic at byte {cut}" in str(info.value)


def test_invalid_json_names_frame_and_line(tmp_path):
    lines = plain_lines(A_LOG)
    lines[5] = b'{"type":"turn/start","seq":4,'
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:4], lines[4:]])
    with pytest.raises(SessionFormatError) as info:
        list(open_log(path).events())
    err = info.value
    assert (err.frame, err.line, err.last_good_seq) == (2, 6, 3)
    assert "invalid JSON" in err.reason


def test_invalid_json_in_plain_file(tmp_path):
    lines = plain_lines(A_LOG)
    lines[3] = b"}{"
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    with pytest.raises(SessionFormatError) as info:
        list(open_log(path).events())
    assert info.value.line == 4 and info.value.frame is None
    assert info.value.last_good_seq == 1


@pytest.mark.parametrize("version", [3, "4", None])
def test_unsupported_header_version(tmp_path, version):
    lines = plain_lines(A_LOG)
    header = json.loads(lines[0])
    header["version"] = version
    lines[0] = json.dumps(header).encode()
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:]])
    with pytest.raises(SessionFormatError) as info:
        open_log(path)
    assert "unsupported header version" in str(info.value)
    assert info.value.line == 1


def test_v0_header_under_a_v4_name_is_wrong_version(tmp_path):
    lines = plain_lines(A_LOG)
    lines[0] = lines[0].replace(b'"version":4', b'"version":0')
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:]])
    with pytest.raises(SessionFormatError, match="wrong header version 0"):
        open_log(path)


def test_header_and_events_in_one_frame_are_refused(tmp_path):
    lines = plain_lines(A_LOG)
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines])
    with pytest.raises(SessionFormatError, match="first frame is not exactly one header line"):
        open_log(path)


def test_any_regrouping_of_event_frames_reads_the_same(tmp_path):
    lines = plain_lines(A_LOG)
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:]])
    assert list(open_log(path).events()) == list(open_log(A_LOG).events())


def test_seq_gap(tmp_path):
    lines = plain_lines(A_LOG)
    del lines[6]  # seq 5
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:4], lines[4:]])
    with pytest.raises(SessionFormatError) as info:
        list(open_log(path).events())
    assert "seq gap (expected 5, got 6)" in str(info.value)
    assert info.value.line == 7 and info.value.last_good_seq == 4


def edit_event(lines: list[bytes], seq: int, change) -> None:
    event = json.loads(lines[seq + 1])
    change(event)
    lines[seq + 1] = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


def read_edited(tmp_path, seq, change):
    lines = plain_lines(A_LOG)
    edit_event(lines, seq, change)
    path = write_frames(tmp_path / "session.v4.jsonl.zstd", [lines[:1], lines[1:]])
    log = open_log(path)
    return log, list(log.events())


def test_unexpected_envelope_field(tmp_path):
    with pytest.raises(SessionFormatError, match="unexpected field foo"):
        read_edited(tmp_path, 4, lambda e: e.update(foo=1))


def test_surface_op_missing_on_a_message(tmp_path):
    with pytest.raises(SessionFormatError, match="surfaceOp requires an object"):
        read_edited(tmp_path, 17, lambda e: e.pop("surfaceOp"))


def test_surface_op_forbidden_on_step_end(tmp_path):
    with pytest.raises(SessionFormatError, match="not surface-eligible"):
        read_edited(tmp_path, 18, lambda e: e.update(surfaceOp="append"))


def test_malformed_packed_row_is_a_warning_and_the_stream_is_left_out(tmp_path):
    # DSH replays a message from its content and does not check the stream on load.
    def break_row(event):
        event["data"]["stream"][1]["dt"] = []

    log, events = read_edited(tmp_path, 17, break_row)
    assert len(events) == 20
    [warning] = log.warnings
    assert warning.startswith("frame 1, line 19: assistant/message (seq 17): data.stream[1]: ")
    assert "862 members but 0 time gaps" in warning and "the stream is ignored" in warning
    record = next(r for r in open_log(log.path).records() if r.seq == 17)
    assert record.view.stream is None and len(record.view.blocks) == 2


def test_unknown_type_is_reported_not_dropped(tmp_path):
    log, events = read_edited(tmp_path, 5, lambda e: e.update(type="x/y"))
    assert [e["type"] for e in events].count("x/y") == 1
    assert len(log.warnings) == 1 and "'x/y' (seq 5)" in log.warnings[0]


def test_unknown_ignorable_type_is_silent(tmp_path):
    log, events = read_edited(tmp_path, 5, lambda e: e.update(type="x/y", ignorable=True))
    assert len(events) == 20 and log.warnings == []


def test_truncated_last_line_in_plain_file(tmp_path):
    data = A_LOG.with_suffix("").read_bytes()
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(data[:-30])
    with pytest.raises(TornTailError) as info:
        list(open_log(path).events())
    assert info.value.line == 21 and info.value.last_good_seq == 18


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "session.v4.jsonl.zstd"
    empty.write_bytes(b"")
    with pytest.raises(SessionFormatError, match="empty file"):
        open_log(empty)
    with pytest.raises(SessionAccessError, match="file not found"):
        open_log(tmp_path / "nope" / "session.v4.jsonl.zstd")


def test_vanished_between_open_and_read(tmp_path):
    path = copy_fixture(tmp_path)
    log = open_log(path)
    path.unlink()
    with pytest.raises(SessionAccessError, match="file not found") as info:
        next(log.events())
    assert not isinstance(info.value, SessionFormatError)


# --- legacy version 0 -------------------------------------------------------------------------


def test_legacy_v0_with_packed_rows(tmp_path):
    rows = [
        {
            "type": "session",
            "version": 0,
            "id": "9b2b",
            "createdAt": 1,
            "cwd": "/p",
            "delegationDepth": 0,
        },
        {"type": "turn/start", "seq": 0, "time": 10, "data": {"turn": 1}},
        {
            "type": "assistant/chunk",
            "seq": 1,
            "time": 11,
            "data": {
                "turn": 1,
                "step": 1,
                "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
            },
        },
        {
            "type": "text-chunks",
            "seq0": 2,
            "time0": 12,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
        },
        {
            "type": "assistant/message",
            "seq": 5,
            "time": 20,
            "sourceEventSeqs": [1, 2, 3, 4],
            "data": {
                "turn": 1,
                "step": 1,
                "message": {"role": "assistant", "content": [{"type": "text", "text": "abc"}]},
            },
        },
        {
            "type": "turn/end",
            "seq": 6,
            "time": 21,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    lines = [json.dumps(r).encode() for r in rows]
    path = write_frames(tmp_path / "session.jsonl.zstd", [lines[:1], lines[1:]])
    log = open_log(path)
    assert log.is_legacy
    events = list(log.events())
    assert [e["seq"] for e in events] == list(range(7))
    chunks = [e["data"]["chunk"] for e in events if e["type"] == "assistant/chunk"]
    assert [c.get("text") for c in chunks] == [None, "a", "b", "c"]
    assert [e["time"] for e in events[2:5]] == [12, 13, 14]


def test_legacy_packed_row_seq_gap(tmp_path):
    rows = [
        {"type": "session", "version": 0, "id": "x", "createdAt": 1, "delegationDepth": 0},
        {"type": "turn/start", "seq": 0, "time": 10, "data": {"turn": 1}},
        {
            "type": "text-chunks",
            "seq0": 2,
            "time0": 12,
            "data": {"index": 0, "dt": [], "texts": ["a"]},
        },
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SessionFormatError, match=r"seq gap \(expected 1, got 2\)"):
        list(open_log(path).events())


def test_fixture_frames_carry_dsh_frame_flags():
    params = zstandard.get_frame_parameters(A_LOG.read_bytes())
    ours = zstandard.get_frame_parameters(compress_frame(b"x\n"))
    assert params.has_checksum and ours.has_checksum
    assert params.content_size == ours.content_size == zstandard.CONTENTSIZE_UNKNOWN


def test_a_line_may_span_frames_and_is_still_edited(tmp_path):
    lines = plain_lines(A_LOG)
    text = b"".join(x + b"\n" for x in lines[1:])
    middle = text.index(b"\n", len(text) // 2) - 100  # inside line 20 (seq 18)
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(
        compress_frame(lines[0] + b"\n")
        + compress_frame(text[:middle])
        + compress_frame(text[middle:])
    )
    assert list(open_log(path).events()) == list(open_log(A_LOG).events())
    from looprescue.dsh.edit import rewrite_lines, verify_line_edits
    from looprescue.dsh.writer import LogWriter

    log = open_log(path)
    [split] = [r.line for r in log.records() if r.line.frame != 2 and r.line.number > 2][-1:]
    new_line = lines[split.number - 1].replace(b'"turn":1', b'"turn":1', 1)
    writer = LogWriter(path, "zstd")
    rewrite_lines(log, {split.number: new_line}, writer)
    writer.commit(verify_line_edits(log, {split.number: new_line}), lambda: None)
    assert list(open_log(path).events()) == list(open_log(A_LOG).events())
    # the two frames the line ran across became one; the header frame was copied
    assert [f.content.count(b"\n") for f in iter_frames(path)] == [1, len(lines) - 1]
