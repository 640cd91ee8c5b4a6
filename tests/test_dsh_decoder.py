"""The one log decoder (bytes in; frames, lines and torn tails out) on the real fixtures."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.test_dsh_helpers import fixture_log

from looprescue.dsh import SessionFormatError, TornTailError, open_log
from looprescue.dsh.decoder import Frame, Line, LogDecoder, compress_frame, intact_frame_in

A_LOG = fixture_log("a_reasoning_loop")
D_LOG = fixture_log("d_tool_loop")


def decode(data: bytes, pieces: list[int] | None = None, encoding: str | None = None):
    """Items of ``data`` fed in pieces of the given sizes (the rest in one), and the tail."""
    decoder = LogDecoder(encoding)
    items, start = [], 0
    for size in pieces or []:
        items += decoder.feed(data[start : start + size])
        start += size
    items += decoder.feed(data[start:])
    return items, decoder.close()


def lines_of(items) -> list[bytes]:
    return [item.raw for item in items if isinstance(item, Line)]


def frames_of(items) -> list[Frame]:
    return [item for item in items if isinstance(item, Frame)]


def skippable(payload: bytes, nibble: int = 3) -> bytes:
    return struct.pack("<I", 0x184D2A50 | nibble) + struct.pack("<I", len(payload)) + payload


def test_a_fixture_decodes_to_its_lines_and_dsh_frames():
    items, torn = decode(D_LOG.read_bytes())
    assert torn is None
    assert lines_of(items) == D_LOG.with_suffix("").read_bytes().splitlines()
    frames = frames_of(items)
    assert len(frames) == 25 and frames[0].last_line == 1
    assert all(f.at_line_boundary for f in frames)
    assert frames[-1].offset + frames[-1].size == D_LOG.stat().st_size
    # every line knows the frame it sits in and that frame's offset
    for line in (x for x in items if isinstance(x, Line)):
        frame = frames[line.frame]
        assert line.frame_offset == frame.offset and line.position == frame.offset


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=700), max_size=30))
def test_any_split_of_the_bytes_gives_the_same_items(pieces):
    data = A_LOG.read_bytes()
    assert decode(data, pieces) == decode(data)


def test_byte_by_byte():
    data = A_LOG.read_bytes()
    assert decode(data, [1] * len(data)) == decode(data)


def test_skippable_frames_are_not_corruption():
    data = A_LOG.read_bytes()
    frames = frames_of(decode(data)[0])
    cut = frames[3].offset
    mixed = skippable(b"") + data[:cut] + skippable(b"meta", 0xF) + data[cut:] + skippable(b"x")
    items, torn = decode(mixed, [5, 9])
    assert torn is None
    assert lines_of(items) == lines_of(decode(data)[0])
    kinds = [f.skippable for f in frames_of(items)]
    assert kinds == [True, False, False, False, True, False, False, False, False, True]
    assert frames_of(items)[4].offset == cut + 8  # 8 bytes of the first skippable frame


def test_a_skippable_frame_in_a_real_log_reads_and_scans(tmp_path):
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(A_LOG.read_bytes() + skippable(b"written by another tool"))
    assert list(open_log(path).events()) == list(open_log(A_LOG).events())


@pytest.mark.parametrize(
    ("cut", "reason", "frame"),
    [
        (-10, "file ends inside frame 6", 6),
        (-3, "file ends inside frame 6", 6),  # only the checksum is missing
    ],
)
def test_a_torn_last_frame_keeps_its_decodable_lines_for_salvage(cut, reason, frame):
    data = D_LOG.read_bytes()
    frames = frames_of(decode(data)[0])
    last = frames[-1]
    items, torn = decode(data[:cut])
    assert frames_of(items) == frames[:-1]
    assert torn is not None and torn.frame == last.index == 24 and torn.offset == last.offset
    assert isinstance(torn.error, TornTailError)
    assert "file ends inside frame 24" in str(torn.error) and torn.error.line == 72
    if cut == -3:  # the blocks arrived, the checksum did not: all four lines are decodable
        assert [x.number for x in torn.lines] == [72, 73, 74, 75]
    del reason, frame


def test_stray_bytes_after_the_last_frame():
    data = A_LOG.read_bytes()
    _items, torn = decode(data + b"\x28\xb5")
    assert torn is not None and torn.frame == 7 and torn.lines == ()
    assert "inside the header of frame 7 (2 stray bytes)" in str(torn.error)
    _items, torn = decode(data + skippable(b"payload")[:-3])
    assert "inside the skippable frame 7" in str(torn.error)


def test_bad_magic_and_bad_checksum_name_frame_and_offset_after_the_good_items():
    data = A_LOG.read_bytes()
    frames = frames_of(decode(data)[0])
    cut = frames[2].offset
    decoder = LogDecoder()
    seen = []
    with pytest.raises(SessionFormatError) as info:
        seen.extend(decoder.feed(data[:cut] + b"garbage!" + data[cut:]))
    assert info.value.frame == 2 and info.value.offset == cut
    assert f"invalid frame magic at byte {cut}" in str(info.value)
    assert frames_of(seen) == frames[:2]  # what was complete before the damage came out first

    raw = bytearray(data)
    raw[frames[4].offset + frames[4].size - 2] ^= 0xFF  # inside the 4-byte checksum
    with pytest.raises(SessionFormatError, match="corrupt zstd frame 4 starting at byte"):
        decode(bytes(raw))


def test_a_line_that_runs_across_frames_starts_where_it_starts():
    header, *events = A_LOG.with_suffix("").read_bytes().splitlines(keepends=True)
    text = b"".join(events)
    middle = len(text) // 2
    data = compress_frame(header) + compress_frame(text[:middle]) + compress_frame(text[middle:])
    items, torn = decode(data)
    assert torn is None
    frames = frames_of(items)
    assert [f.at_line_boundary for f in frames] == [True, False, True]
    split = next(x for x in items if isinstance(x, Line) and x.offset + len(x.raw) >= middle)
    assert split.frame == 1 and split.frame_offset == frames[1].offset
    assert lines_of(items) == [x.rstrip(b"\n") for x in [header, *events]]


def test_empty_frames_hold_no_lines_and_end_on_a_boundary():
    data = A_LOG.read_bytes()
    items, torn = decode(data + compress_frame(b"") + compress_frame(b""))
    assert torn is None and lines_of(items) == lines_of(decode(data)[0])
    assert [f.at_line_boundary for f in frames_of(items)[-2:]] == [True, True]


def test_the_first_frame_must_be_the_header_alone():
    lines = A_LOG.with_suffix("").read_bytes().splitlines(keepends=True)
    with pytest.raises(SessionFormatError, match="first frame is not exactly one header line"):
        decode(compress_frame(b"".join(lines[:2])))
    # a skippable frame before it does not count as the first frame
    items, _ = decode(skippable(b"") + compress_frame(lines[0]) + compress_frame(lines[1]))
    assert len(lines_of(items)) == 2


def test_the_last_line_without_its_newline():
    data = compress_frame(b'{"type":"session"}\n') + compress_frame(b'{"a":1}\n{"b":')
    items, torn = decode(data)
    assert lines_of(items) == [b'{"type":"session"}', b'{"a":1}']
    assert torn is not None and torn.frame is None and torn.error.frame == 1
    assert "the last line is truncated" in str(torn.error) and torn.error.line == 3


def test_plain_jsonl_lines_carry_their_byte_offsets():
    data = b'{"type":"session"}\n{"a":1}\n{"b":2'
    items, torn = decode(data, [3, 1, 20])
    assert [(x.number, x.offset, x.frame) for x in items] == [(1, 0, None), (2, 19, None)]
    assert torn is not None and torn.error.offset == 27 and torn.error.line == 3


def test_a_10_mb_line_is_one_line():
    line = b'{"x":"' + b"a" * 10_000_000 + b'"}'
    items, torn = decode(line + b"\n" + line[:100], [1 << 16] * 160)
    assert torn is not None and [len(x) for x in lines_of(items)] == [len(line)]
    items, torn = decode(compress_frame(b"{}\n") + compress_frame(line + b"\n"), [4096] * 40)
    assert torn is None and [len(x) for x in lines_of(items)] == [2, len(line)]


def test_intact_frame_in():
    data = A_LOG.read_bytes()
    assert intact_frame_in(b"\0" * 100 + data[:500])
    assert not intact_frame_in(b"\0" * 100 + data[:20])
