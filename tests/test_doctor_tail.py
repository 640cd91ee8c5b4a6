"""Following a live session log: appended zstd frames on a real file."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from tests.test_doctor_helpers import a_busy_session

from looprescue.doctor.tail import SessionTail
from looprescue.dsh import SessionAccessError, SessionFormatError
from looprescue.dsh.decoder import Line, LogDecoder
from looprescue.dsh.frames import compress_frame

SESSIONS_LOG = a_busy_session()
LINES = SESSIONS_LOG.lines()


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_frames_are_decoded_only_when_complete(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(compress_frame(LINES[0]))
    tail = SessionTail(path)
    first = tail.poll()
    assert first.header == SESSIONS_LOG.header and first.events == []

    frame = compress_frame(b"".join(LINES[1:4]))
    append(path, frame[: len(frame) // 2])  # DSH is mid-append
    assert tail.poll().events == []
    append(path, frame[len(frame) // 2 :])
    assert tail.poll().events == SESSIONS_LOG.events[0:3]

    for start in range(4, len(LINES), 5):
        append(path, compress_frame(b"".join(LINES[start : start + 5])))
    rest = tail.poll()
    assert rest.events == SESSIONS_LOG.events[3:] and not rest.notices and not rest.restarted
    assert tail.poll().events == []


def test_plain_jsonl_waits_for_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0] + LINES[1][:10])
    tail = SessionTail(path)
    update = tail.poll()
    assert update.header == SESSIONS_LOG.header and update.events == []
    append(path, LINES[1][10:] + LINES[2])
    assert tail.poll().events == SESSIONS_LOG.events[0:2]


def test_truncation_is_reported_and_reading_restarts(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    frames = [compress_frame(LINES[0]), compress_frame(b"".join(LINES[1:6]))]
    path.write_bytes(b"".join(frames))
    tail = SessionTail(path)
    assert len(tail.poll().events) == 5
    with open(path, "r+b") as fh:
        fh.truncate(len(frames[0]))
    update = tail.poll()
    assert update.restarted and "truncated" in update.notices[0]
    assert update.header == SESSIONS_LOG.header and update.events == []


def test_rotation_is_reported_and_the_new_file_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(compress_frame(LINES[0]) + compress_frame(b"".join(LINES[1:3])))
    tail = SessionTail(path)
    assert len(tail.poll().events) == 2
    replacement = tmp_path / "new.tmp"
    replacement.write_bytes(compress_frame(LINES[0]) + compress_frame(b"".join(LINES[1:9])))
    os.replace(replacement, path)  # what an editor does: temp file + atomic rename
    update = tail.poll()
    assert update.restarted and "rotated" in update.notices[0]
    assert update.events == SESSIONS_LOG.events[:8]


def test_rewrite_in_place_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0] + LINES[1])
    tail = SessionTail(path)
    tail.poll()
    other = dict(SESSIONS_LOG.header, id="session-00000000-0000-4000-8000-0000000000ff")
    with open(path, "r+b") as fh:
        fh.write(orjson.dumps(other) + b"\n" + LINES[1] + LINES[2])
    update = tail.poll()
    assert update.restarted and "rewritten" in update.notices[0]
    assert update.header == other and len(update.events) == 2


def test_removed_file_is_reported_once_then_picked_up_again(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0] + LINES[1])
    tail = SessionTail(path)
    tail.poll()
    path.unlink()
    assert "removed" in tail.poll().notices[0]
    assert tail.poll().notices == []
    path.write_bytes(LINES[0] + LINES[1] + LINES[2])
    update = tail.poll()
    assert update.restarted and len(update.events) == 2


def test_a_removed_file_that_comes_back_as_a_directory_is_reported_again(tmp_path: Path) -> None:
    # a poll can fall between the removal and the mkdir: the second state is news too
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0] + LINES[1])
    tail = SessionTail(path)
    tail.poll()
    path.unlink()
    assert "removed" in tail.poll().notices[0]
    path.mkdir()
    assert "is a directory" in tail.poll().notices[0]
    assert tail.poll().notices == []
    path.rmdir()
    path.write_bytes(LINES[0] + LINES[1])
    assert "reappeared" in tail.poll().notices[0]


def test_missing_file_and_garbage_fail_loudly_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(SessionAccessError, match="no such session log"):
        SessionTail(tmp_path / "absent.zstd")
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(compress_frame(LINES[0]) + b"\x00garbage")
    with pytest.raises(SessionFormatError) as caught:
        SessionTail(path).poll()
    assert str(path) in str(caught.value) and "frame 1" in str(caught.value)
    plain = tmp_path / "session.v4.jsonl"
    plain.write_bytes(LINES[0] + b"{not json\n")
    with pytest.raises(SessionFormatError, match="line 2"):
        SessionTail(plain).poll()
    plain.write_bytes(b'{"type":"nope"}\n')
    with pytest.raises(SessionFormatError, match="line 1"):
        SessionTail(plain).poll()


def test_decoder_byte_by_byte_equals_all_at_once() -> None:
    data = compress_frame(LINES[0]) + compress_frame(b"".join(LINES[1:]))
    decoder = LogDecoder()
    items = [item for byte in range(len(data)) for item in decoder.feed(data[byte : byte + 1])]
    lines = [item.raw for item in items if isinstance(item, Line)]
    assert lines == [line.rstrip(b"\n") for line in LINES]
    assert [type(item).__name__ for item in items].count("Frame") == 2
    assert decoder.pending_bytes == 0 and decoder.encoding == "zstd"
    assert decoder.close() is None


def test_a_long_log_is_taken_in_bounded_bites(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    frames = [compress_frame(LINES[0])] + [compress_frame(line) for line in LINES[1:]]
    path.write_bytes(b"".join(frames))
    tail = SessionTail(path)
    events, polls = [], 0
    while True:
        update = tail.poll(max_bytes=100)
        polls += 1
        events += update.events
        assert len(update.events) <= 2  # a frame here is well over 50 bytes
        if not update.more:
            break
    assert events == SESSIONS_LOG.events
    assert polls >= len(b"".join(frames)) // 100


def test_an_appended_seq_gap_is_an_error_naming_file_frame_and_line(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(compress_frame(LINES[0]) + compress_frame(b"".join(LINES[1:4])))
    tail = SessionTail(path)
    assert len(tail.poll().events) == 3
    append(path, compress_frame(b"".join(LINES[5:7])))  # seq 3 is missing
    with pytest.raises(SessionFormatError) as caught:
        tail.poll()
    err = caught.value
    assert err.path == path and err.frame == 2 and err.line == 5 and err.last_good_seq == 2
    assert "seq gap (expected 3, got 4)" in str(err)


def test_a_wrong_type_in_an_appended_event_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0])
    tail = SessionTail(path)
    tail.poll()
    append(path, b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":"1"}}\n')
    with pytest.raises(SessionFormatError, match=r"data.turn must be an integer, got a string"):
        tail.poll()


def test_replaced_by_a_directory_is_reported_once_then_followed_again(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0] + LINES[1])
    tail = SessionTail(path)
    tail.poll()
    path.unlink()
    path.mkdir()
    update = tail.poll()
    assert update.notices == [f"{path}: session log is a directory, expected a session log "
                              "file; waiting for it"]  # fmt: skip
    assert tail.poll().notices == []
    path.rmdir()
    path.write_bytes(LINES[0] + LINES[1] + LINES[2])
    update = tail.poll()
    assert update.restarted and len(update.events) == 2


def test_a_fifo_in_place_of_the_log_does_not_block(tmp_path: Path) -> None:
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(LINES[0])
    tail = SessionTail(path)
    tail.poll()
    path.unlink()
    os.mkfifo(path)
    assert "not a regular file (a FIFO)" in tail.poll().notices[0]


def test_the_tail_reads_what_the_file_reader_reads(tmp_path: Path) -> None:
    # one decoder and one record reader: the same events, the same tolerated warnings
    from tests.test_dsh_helpers import fixture_log

    from looprescue.dsh import open_log

    source = fixture_log("h_stream_cut")
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(source.read_bytes())
    update = SessionTail(path).poll()
    assert update.events == list(open_log(source).events())
