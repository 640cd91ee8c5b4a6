"""The incremental SSE parser: any byte split gives the same events; bad bytes name the frame."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.scripted_upstream import dsh_recorded_requests

from looprescue.wire.sse import SSEError, SSEParser, format_event

STREAM = (
    'event: message_start\ndata: {"type":"message_start"}\n\n'
    ": a comment\n"
    'event: content_block_delta\r\ndata: {"text":"好的。现在"}\r\n\r\n'
    "data: line one\ndata: line two\n\n"
    "id: 7\nretry: 100\nevent: ping\ndata: {}\r\r"
    "event: only-event\n\n"
    "data: [DONE]\n\n"
)


def parse_all(chunks: list[bytes]) -> list[tuple[str | None, str, str | None]]:
    parser = SSEParser()
    events = []
    for chunk in chunks:
        events += [(e.event, e.data, e.id) for e in parser.feed(chunk)]
    parser.close()
    return events


EXPECTED = [
    ("message_start", '{"type":"message_start"}', None),
    ("content_block_delta", '{"text":"好的。现在"}', None),
    (None, "line one\nline two", None),
    ("ping", "{}", "7"),
    (None, "[DONE]", "7"),
]


def test_whole_stream() -> None:
    assert parse_all([STREAM.encode()]) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(STREAM.encode())), max_size=20))
def test_any_byte_split_gives_the_same_events(cuts: list[int]) -> None:
    data = STREAM.encode()
    points = sorted(set(cuts))
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assert parse_all(chunks) == EXPECTED


def test_invalid_utf8_names_the_byte_and_frame() -> None:
    parser = SSEParser()
    parser.feed(b"data: ok\n\n")
    with pytest.raises(SSEError, match=r"invalid UTF-8 at byte 16 \(in frame 2\)"):
        parser.feed(b"data: \xff\xfe\n\n")


def test_stream_ending_inside_a_character_is_an_error() -> None:
    parser = SSEParser()
    parser.feed("data: 好".encode()[:-1])
    with pytest.raises(SSEError, match="inside a UTF-8 character"):
        parser.close()


def test_overlong_line_is_an_error() -> None:
    parser = SSEParser(max_line=64)
    with pytest.raises(SSEError, match="longer than 64"):
        parser.feed(b"data: " + b"x" * 100)


def test_partial_frame_is_reported() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: x\ndata: 1\n") == []
    assert parser.has_partial_frame
    assert parser.feed(b"\n")[0].data == "1"
    assert not parser.has_partial_frame


def test_format_event_round_trips_multiline_data() -> None:
    frame = format_event("a\nb", "note")
    assert frame == b"event: note\ndata: a\ndata: b\n\n"
    (event,) = SSEParser().feed(frame)
    assert (event.event, event.data, event.number) == ("note", "a\nb", 1)


def test_recorded_dsh_bodies_parse_as_json_after_framing() -> None:
    """Real request bodies DSH sent survive framing as SSE data (long lines, CJK, escapes)."""
    row = dsh_recorded_requests("a_reasoning_loop")[0]
    body = json.dumps(row["body"], ensure_ascii=False)
    (event,) = SSEParser().feed(format_event(body, "request"))
    assert json.loads(event.data) == row["body"]
