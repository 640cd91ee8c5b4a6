"""Following a live session log while DSH appends to it (`looprescue doctor --follow`).

Two parts: `LogDecoder`, pure, turns appended bytes into complete lines (only complete zstd
frames are decoded; a frame or line still being written waits for the next poll); and
`SessionTail`, the thin file adapter that polls for new bytes and notices when the file was
truncated, rotated, rewritten or removed under it, so the caller can report it and start over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from looprescue.dsh.envelope import EnvelopeProblem, check_header, parse_json_line
from looprescue.dsh.errors import SessionAccessError, SessionFormatError
from looprescue.dsh.frames import ZSTD_MAGIC

_READ_SIZE = 1 << 20
POLL_BYTES = 4 << 20  # per poll, so a long existing log is taken in bounded bites
_FINGERPRINT_BYTES = 4096  # the file's start (header frame first): changes only on a rewrite


class LogDecoder:
    """Bytes of a session log in, complete lines out; the encoding is taken from the magic."""

    def __init__(self) -> None:
        self.encoding: str | None = None  # "zstd" | "plain", known after 4 bytes
        self._raw = b""  # compressed bytes not yet forming a complete frame
        self._text = b""  # decoded bytes not yet forming a complete line
        self._frame = 0
        self._frame_offset = 0
        self._dctx = zstandard.ZstdDecompressor()

    def feed(self, data: bytes) -> list[bytes]:
        """Lines (without newline) completed by ``data``.

        Raises SessionFormatError (naming frame and byte offset, the caller adds the file) when
        the bytes are not a zstd frame or a complete frame does not decode.
        """
        self._raw += data
        if self.encoding is None:
            if len(self._raw) < len(ZSTD_MAGIC):
                return []
            self.encoding = "zstd" if self._raw.startswith(ZSTD_MAGIC) else "plain"
        if self.encoding == "plain":
            self._text += self._raw
            self._raw = b""
        else:
            self._decode_frames()
        *lines, self._text = self._text.split(b"\n")
        return lines

    @property
    def pending_bytes(self) -> int:
        """Bytes held back: a frame or line DSH has not finished writing (yet)."""
        return len(self._raw) + len(self._text)

    def _decode_frames(self) -> None:
        while len(self._raw) >= len(ZSTD_MAGIC):
            if not self._raw.startswith(ZSTD_MAGIC):
                raise SessionFormatError(
                    f"invalid frame magic at byte {self._frame_offset}",
                    frame=self._frame,
                    offset=self._frame_offset,
                )
            decoder = self._dctx.decompressobj()
            try:
                content = decoder.decompress(self._raw)
            except zstandard.ZstdError as err:
                raise SessionFormatError(
                    f"corrupt zstd frame: {err}", frame=self._frame, offset=self._frame_offset
                ) from None
            if not decoder.eof:
                return  # torn for now: decoded again, whole, once the rest has arrived
            rest = decoder.unused_data
            self._frame_offset += len(self._raw) - len(rest)
            self._frame += 1
            self._raw = rest
            self._text += content


@dataclass
class TailUpdate:
    """What one poll found. ``restarted``: the file changed under us; the caller discards what
    it built from the old content. ``header`` is set when the header line was read."""

    header: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    restarted: bool = False
    more: bool = False  # stopped at the byte budget: poll again right away


class SessionTail:
    """Polls one session log file for appended events."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file_id: tuple[int, int] | None = None
        self._missing_reported = False
        self._reset()
        if not self.path.is_file():
            raise SessionAccessError("no such session log file", path=self.path)

    def _reset(self) -> None:
        self._offset = 0
        self._fingerprint = b""
        self._decoder = LogDecoder()
        self._line_no = 0
        self.header: dict[str, Any] | None = None

    def poll(self, max_bytes: int = POLL_BYTES) -> TailUpdate:
        """New events since the last poll, reading at most about ``max_bytes`` of the file."""
        update = TailUpdate()
        try:
            with open(self.path, "rb") as fh:
                stat = os.fstat(fh.fileno())
                self._check_same_file(fh, stat, update)
                self._missing_reported = False
                fh.seek(self._offset)
                budget = max_bytes
                while budget > 0 and (chunk := fh.read(min(_READ_SIZE, budget))):
                    budget -= len(chunk)
                    self._offset += len(chunk)
                    if len(self._fingerprint) < _FINGERPRINT_BYTES:
                        self._fingerprint += chunk[: _FINGERPRINT_BYTES - len(self._fingerprint)]
                    self._take(chunk, update)
                update.more = self._offset < os.fstat(fh.fileno()).st_size
        except FileNotFoundError:
            if not self._missing_reported:
                update.notices.append(f"{self.path}: session log removed; waiting for it")
                self._missing_reported = True
        except PermissionError:
            raise SessionAccessError("permission denied", path=self.path) from None
        return update

    def _check_same_file(self, fh: Any, stat: os.stat_result, update: TailUpdate) -> None:
        file_id = (stat.st_dev, stat.st_ino)
        reason = None
        if self._missing_reported:
            reason = "reappeared"
        elif self._file_id is not None and file_id != self._file_id:
            reason = "was replaced (rotated)"
        elif stat.st_size < self._offset:
            reason = f"was truncated ({self._offset} -> {stat.st_size} bytes)"
        elif self._fingerprint and fh.read(len(self._fingerprint)) != self._fingerprint:
            reason = "was rewritten in place"
        self._file_id = file_id
        if reason is not None:
            update.notices.append(f"{self.path}: session log {reason}; reading it from the start")
            update.restarted = True
            update.events.clear()
            update.header = None
            self._reset()

    def _take(self, chunk: bytes, update: TailUpdate) -> None:
        try:
            lines = self._decoder.feed(chunk)
        except SessionFormatError as err:
            raise err.fill(path=self.path) from None
        for raw in lines:
            self._line_no += 1
            try:
                value = parse_json_line(raw)
                if self.header is None:
                    check_header(value, None)
                    self.header = update.header = value
                    continue
            except EnvelopeProblem as problem:
                raise SessionFormatError(str(problem), path=self.path, line=self._line_no) from None
            if not isinstance(value, dict):
                raise SessionFormatError(
                    "event line is not a JSON object", path=self.path, line=self._line_no
                )
            update.events.append(value)
