"""Incremental Server-Sent Events parser (bytes in, events out), per the WHATWG rules.

Feed it whatever chunks the transport delivers; it returns complete events only, so a frame,
a line or a UTF-8 character split across chunks is handled. Malformed input (invalid UTF-8, a
line longer than the limit) raises :class:`SSEError` naming the frame and byte offset.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Final

DEFAULT_MAX_LINE = 16 * 1024 * 1024


class SSEError(ValueError):
    """The byte stream is not valid SSE; the message names the frame number and byte offset."""


@dataclass(slots=True, init=False, unsafe_hash=True)
class SSEEvent:
    """One dispatched event. ``event`` is None when the frame had no ``event:`` line. (One is
    made per upstream frame, so its ``__init__`` is written out: see ``rescue/events.py``; a
    named tuple's ``__new__`` is interpreted code too.)"""

    event: Final[str | None]
    data: Final[str]
    id: Final[str | None]
    number: Final[int]  # 1-based count of dispatched events, for error messages

    def __init__(self, event: str | None, data: str, id: str | None, number: int) -> None:
        self.event = event
        self.data = data
        self.id = id
        self.number = number

    def describe(self) -> str:
        return f"SSE event #{self.number}" + (f" ({self.event})" if self.event else "")


class SSEParser:
    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._partial = b""  # the start of a UTF-8 character split across chunks
        self._buffer = ""
        self._max_line = max_line
        self._bytes_seen = 0
        self._event: str | None = None
        self._data: list[str] = []  # not empty once the frame has a data line
        self._last_id: str | None = None
        self._dispatched = 0
        self._pending_cr = False
        self._started = False

    @property
    def events_dispatched(self) -> int:
        return self._dispatched

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        data = self._partial + chunk if self._partial else chunk
        try:
            text, used = _utf8_decode(data, "strict", False)
        except UnicodeDecodeError as err:
            offset = self._bytes_seen + err.start
            raise SSEError(
                f"invalid UTF-8 at byte {offset} (in frame {self._dispatched + 1})"
            ) from None
        self._partial = data[used:] if used < len(data) else b""
        self._bytes_seen += len(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if not self._pending_cr and "\r" not in text:
            return self._consume_lf(text)
        return self._consume(text)

    def close(self) -> list[SSEEvent]:
        """End of stream: a trailing frame without its blank line is discarded, per the
        standard; returns nothing but validates the decoder state."""
        if self._partial:
            raise SSEError(f"stream ended inside a UTF-8 character at byte {self._bytes_seen}")
        return []

    @property
    def has_partial_frame(self) -> bool:
        """True when bytes of an unfinished frame are buffered (stream cut mid-frame)."""
        return bool(self._buffer) or bool(self._data) or self._event is not None

    def _consume(self, text: str) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the \n of a \r\n split across chunks
        self._pending_cr = False
        buffer = self._buffer + text
        position = 0
        length = len(buffer)
        while position < length:
            cr = buffer.find("\r", position)
            lf = buffer.find("\n", position)
            if cr == -1 and lf == -1:
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, next_position = lf, lf + 1
            else:
                end = cr
                if cr + 1 < length:
                    next_position = cr + 2 if buffer[cr + 1] == "\n" else cr + 1
                else:
                    next_position = cr + 1
                    self._pending_cr = True
            event = self._line(buffer[position:end])
            if event is not None:
                events.append(event)
            position = next_position
        self._buffer = buffer[position:]
        if len(self._buffer) > self._max_line:
            raise SSEError(
                f"line longer than {self._max_line} chars in frame {self._dispatched + 1}"
            )
        return events

    def _consume_lf(self, text: str) -> list[SSEEvent]:
        """The common case, lines ended by LF only: one split, the usual fields inline."""
        lines = (self._buffer + text if self._buffer else text).split("\n")
        rest = self._buffer = lines.pop()
        if len(rest) > self._max_line:
            raise SSEError(
                f"line longer than {self._max_line} chars in frame {self._dispatched + 1}"
            )
        events: list[SSEEvent] = []
        for line in lines:
            if not line:
                if self._data:
                    events.append(self._dispatch())
                else:
                    self._event = None
            elif line.startswith("data:"):
                self._data.append(line[6:] if line[5:6] == " " else line[5:])
            elif line.startswith("event:"):
                self._event = line[7:] if line[6:7] == " " else line[6:]
            else:
                self._line(line)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if self._data:
                return self._dispatch()
            self._event = None
            return None
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._last_id = value
        # "retry" and unknown fields are ignored, as the standard says
        return None

    def _dispatch(self) -> SSEEvent:
        """The frame whose blank line was just read (it has data)."""
        data = self._data
        self._dispatched += 1
        event = SSEEvent(
            self._event,
            data[0] if len(data) == 1 else "\n".join(data),
            self._last_id,
            self._dispatched,
        )
        self._event = None
        self._data = []
        return event


_utf8_decode = codecs.utf_8_decode


def format_event(data: str, event: str | None = None) -> bytes:
    """One SSE frame; multi-line data becomes several ``data:`` lines."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode("utf-8")
