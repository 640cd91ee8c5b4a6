"""The DSH log decoder: bytes in, frames and lines out. Pure: no files, no clocks.

A DSH log is a concatenation of zstd frames, one per durable append batch, or plain JSONL
(FORMAT.md §2). Feed its bytes in pieces of any size; ``feed`` yields every ``Line`` the
bytes completed and, for zstd, every complete ``Frame`` right after the lines it ended.
``close`` says how the input ended: cleanly (None) or torn (``TornTail``: a frame or a line cut
off by the end of the file, what a crash during an append leaves). The lines of a frame are
released only once the whole frame, checksum included, has arrived, so a live reader never
sees half of a batch. Corruption raises ``SessionFormatError`` naming the frame and its byte
offset; the caller adds the file and the last good seq.

The file reader, the live tail (``doctor --follow``), the editor and ``repair`` all read logs
through this one decoder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import zstandard

from looprescue.dsh.errors import SessionFormatError, TornTailError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Skippable frames (RFC 8878 §3.1.2): magic 0x184D2A5? little-endian, a 4-byte size, payload.
_SKIPPABLE_TAIL = b"\x2a\x4d\x18"
_SKIPPABLE_HEADER = 8
# Bytes handed to a frame's decompressor at a time, doubling while the frame goes on: its
# leftover (the start of the next frame) is copied once per frame, so keep it small.
_FIRST_PIECE = 16 << 10
_MAX_PIECE = 4 << 20


class Line(NamedTuple):
    """One line without its newline.

    ``offset`` is the byte offset of the line in the decoded text (for a plain file, in the
    file); ``frame``/``frame_offset`` locate the zstd frame the line starts in (None: plain).
    """

    number: int  # 1-based; the header is line 1
    raw: bytes
    offset: int
    frame: int | None
    frame_offset: int | None

    @property
    def position(self) -> int:
        """The byte an error about this line points at: its frame's, or its own in a plain
        file."""
        return self.frame_offset if self.frame_offset is not None else self.offset


@dataclass(frozen=True, slots=True)
class Frame:
    """One complete zstd frame: where it sits in the file and what it decoded to.

    ``last_line`` is the number of the last line completed once this frame is decoded;
    ``at_line_boundary`` is True when the decoded text so far ends with a newline (a line
    may run on into the next frame; DSH never writes that, but reads it).
    """

    index: int
    offset: int
    size: int
    content: bytes
    last_line: int
    at_line_boundary: bool
    skippable: bool = False
    complete: bool = True


@dataclass(frozen=True, slots=True)
class TornTail:
    """How an input that did not end cleanly ended.

    ``frame``: index of the frame the file ends inside, or None when every frame is complete
    but the last line has no newline (or for a plain file). ``lines``: complete lines
    decodable from the torn frame (what a repair may salvage). ``error`` is what a reader
    raises for it (the caller adds the file).
    """

    frame: int | None
    offset: int
    size: int
    lines: tuple[Line, ...]
    error: TornTailError


_MAGICS = (ZSTD_MAGIC, *(bytes([0x50 | n]) + _SKIPPABLE_TAIL for n in range(16)))


def encoding_of(head: bytes) -> str:
    """'zstd' when a log starts with a zstd frame (a skippable one too), else 'plain'."""
    return "zstd" if head[:4] in _MAGICS else "plain"


class LogDecoder:
    """Bytes of one session log in, ``Line`` and ``Frame`` values out.

    ``encoding`` ("zstd" or "plain") is taken from the first bytes unless given: a log that
    starts with a zstd frame is zstd, anything else is plain JSONL.
    """

    def __init__(self, encoding: str | None = None) -> None:
        self.encoding = encoding
        self._buf = b""  # compressed bytes; those before ``_pos`` are consumed
        self._pos = 0
        self._index = 0  # of the frame being read
        self._offset = 0  # file offset of that frame
        self._frame_bytes = 0  # bytes of that frame consumed so far
        self._inflate: zstandard.ZstdDecompressionObj | None = None
        self._piece = _FIRST_PIECE
        self._parts: list[bytes] = []  # what the frame decoded to so far
        self._skip_left: int | None = None  # payload bytes left of a skippable frame
        self._data_frames = 0
        self._dctx = zstandard.ZstdDecompressor()
        # decoded text not yet forming a complete line, and where that line starts
        self._carry: list[bytes] = []
        self._carry_len = 0
        self._carry_at: tuple[int | None, int | None, int] = (None, None, 0)
        self._text_offset = 0
        self._number = 0

    @property
    def lines_read(self) -> int:
        return self._number

    @property
    def pending_bytes(self) -> int:
        """Bytes held back: a frame or a line that has not been completed (yet)."""
        return len(self._buf) - self._pos + self._frame_bytes + self._carry_len

    def feed(self, data: bytes) -> Iterator[Line | Frame]:
        """Take ``data``; the iterator returned yields the lines (and frames) it completed, in
        file order, and raises SessionFormatError where the bytes are corrupt (after what was
        complete before). Consume it before the next ``feed``."""
        if self.encoding is None:
            head = self._buf + data
            if len(head) < len(ZSTD_MAGIC) and any(m.startswith(head) for m in _MAGICS):
                self._buf = head  # too short to tell yet
                return iter(())
            self.encoding = encoding_of(head)
            self._buf, data = b"", head
        if self.encoding == "plain":
            out: list[Line | Frame] = []
            self._split(data, None, None, out)
            return iter(out)
        self._buf = self._buf[self._pos :] + data if self._pos < len(self._buf) else data
        self._pos = 0
        return self._drain()

    def _drain(self) -> Iterator[Line | Frame]:
        out: list[Line | Frame] = []
        while self._step(out):
            if out:
                yield from out
                out.clear()
        yield from out

    def close(self) -> TornTail | None:
        """The end of the input: None if it ended cleanly, else how it is torn."""
        if self.encoding == "plain":
            return self._cut_last_line("the last line is truncated (no newline at end of file)")
        if self._inflate is not None:
            return self._torn_data_frame()
        stray = self._frame_bytes + len(self._buf) - self._pos
        if stray:
            what = "skippable frame" if self._skip_left is not None else "header of frame"
            return self._torn(f"file ends inside the {what} {self._index} ({stray} stray bytes)")
        return self._cut_last_line(
            "the last line is truncated (no newline at the end of the last frame)"
        )

    # -- zstd -----------------------------------------------------------------------------------

    def _step(self, out: list[Line | Frame]) -> bool:
        """Advance through the buffered bytes; False when more input is needed."""
        available = len(self._buf) - self._pos
        if self._skip_left is not None:
            take = min(self._skip_left, available)
            self._pos += take
            self._frame_bytes += take
            self._skip_left -= take
            if self._skip_left:
                return False
            self._skip_left = None
            out.append(self._frame(b"", skippable=True))
            self._next_frame()
            return True
        if self._inflate is None:
            if available < len(ZSTD_MAGIC):
                return False
            magic = self._buf[self._pos : self._pos + 4]
            if magic == ZSTD_MAGIC:
                self._inflate = self._dctx.decompressobj()
                self._piece = _FIRST_PIECE
            elif magic[0] & 0xF0 == 0x50 and magic[1:] == _SKIPPABLE_TAIL:
                if available < _SKIPPABLE_HEADER:
                    return False
                size = self._buf[self._pos + 4 : self._pos + _SKIPPABLE_HEADER]
                self._skip_left = int.from_bytes(size, "little")
                self._pos += _SKIPPABLE_HEADER
                self._frame_bytes = _SKIPPABLE_HEADER
                return True
            else:
                raise SessionFormatError(
                    f"corrupt zstd session log: invalid frame magic at byte {self._offset}",
                    frame=self._index,
                    offset=self._offset,
                )
        if not available:
            return False
        piece = memoryview(self._buf)[self._pos : self._pos + self._piece]
        self._piece = min(self._piece * 2, _MAX_PIECE)
        try:
            self._parts.append(self._inflate.decompress(piece))
        except zstandard.ZstdError as err:
            raise SessionFormatError(
                f"corrupt zstd frame {self._index} starting at byte {self._offset}: {err}",
                frame=self._index,
                offset=self._offset,
            ) from None
        used = len(piece) - len(self._inflate.unused_data) if self._inflate.eof else len(piece)
        self._pos += used
        self._frame_bytes += used
        if not self._inflate.eof:
            return True
        content = b"".join(self._parts)
        self._inflate, self._parts = None, []
        if self._data_frames == 0 and (content.count(b"\n") != 1 or not content.endswith(b"\n")):
            raise SessionFormatError(
                "first frame is not exactly one header line",
                frame=self._index,
                offset=self._offset,
                line=1,
            )
        self._data_frames += 1
        self._split(content, self._index, self._offset, out)
        out.append(self._frame(content))
        self._next_frame()
        return True

    def _frame(self, content: bytes, *, skippable: bool = False) -> Frame:
        return Frame(
            self._index,
            self._offset,
            self._frame_bytes,
            content,
            self._number,
            not self._carry,
            skippable=skippable,
        )

    def _next_frame(self) -> None:
        self._offset += self._frame_bytes
        self._frame_bytes = 0
        self._index += 1

    def _torn_data_frame(self) -> TornTail:
        """The frame the input ends inside: its decoded blocks may hold complete lines."""
        assert self._inflate is not None
        rest = memoryview(self._buf)[self._pos :]
        # what decoded before any damage is still a candidate for salvage
        with contextlib.suppress(zstandard.ZstdError):
            self._parts.append(self._inflate.decompress(rest))
        self._frame_bytes += len(rest)
        self._pos = len(self._buf)
        partial = b"".join(self._parts)
        first_line = self._number + 1
        salvage: list[Line | Frame] = []
        self._split(partial, self._index, self._offset, salvage)
        lines = tuple(item for item in salvage if isinstance(item, Line))
        complete = partial.count(b"\n")
        return self._torn(
            f"file ends inside frame {self._index} (a partial append: {self._frame_bytes} "
            f"bytes, {complete} complete lines decodable); run `looprescue repair`",
            lines,
            line=first_line,
        )

    def _torn(
        self, reason: str, lines: tuple[Line, ...] = (), *, line: int | None = None
    ) -> TornTail:
        error = TornTailError(
            reason,
            frame=self._index,
            offset=self._offset,
            line=line if line is not None else self._number + 1,
        )
        return TornTail(self._index, self._offset, self._frame_bytes, lines, error)

    # -- lines ----------------------------------------------------------------------------------

    def _split(
        self, content: bytes, frame: int | None, frame_offset: int | None, out: list
    ) -> None:
        find = content.find
        end = find(b"\n")
        start = 0
        if self._carry and end >= 0:
            frame_index, first_offset, offset = self._carry_at
            self._carry.append(content[:end])
            piece = b"".join(self._carry)
            self._carry, self._carry_len = [], 0
            self._emit(piece, offset, frame_index, first_offset, out)
            start = end + 1
            end = find(b"\n", start)
        while end >= 0:
            self._emit(content[start:end], self._text_offset, frame, frame_offset, out)
            start = end + 1
            end = find(b"\n", start)
        if start < len(content):
            if not self._carry:
                self._carry_at = (frame, frame_offset, self._text_offset)
            self._carry.append(content[start:] if start else content)
            self._carry_len += len(content) - start

    def _emit(
        self, raw: bytes, offset: int, frame: int | None, frame_offset: int | None, out: list
    ) -> None:
        self._number += 1
        out.append(Line(self._number, raw, offset, frame, frame_offset))
        self._text_offset = offset + len(raw) + 1

    def _cut_last_line(self, reason: str) -> TornTail | None:
        if not self._carry:
            return None
        frame, frame_offset, offset = self._carry_at
        error = TornTailError(
            reason,
            frame=frame,
            offset=frame_offset if frame_offset is not None else offset,
            line=self._number + 1,
        )
        return TornTail(None, error.offset or 0, self._carry_len, (), error)


def intact_frame_in(data: bytes) -> bool:
    """Whether ``data`` holds a zstd frame that decodes completely, checksum included,
    anywhere (used to tell a corrupt last frame from damage in the middle of a log)."""
    position = data.find(ZSTD_MAGIC)
    while position >= 0:
        inflate = zstandard.ZstdDecompressor().decompressobj()
        try:
            inflate.decompress(data[position:])
            if inflate.eof:
                return True
        except zstandard.ZstdError:
            pass
        position = data.find(ZSTD_MAGIC, position + 1)
    return False


def compress_frame(content: bytes) -> bytes:
    """Encode one batch of lines with the frame flags DSH itself writes (checksum, no size)."""
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False)
    return cctx.compress(content)
