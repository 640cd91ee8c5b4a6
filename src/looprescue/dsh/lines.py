"""Physical lines of a session log, from a multi-frame zstd file or a plain JSONL file.

Each line carries its position (1-based line number, frame index, byte offset) so any later
problem can be reported precisely.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from looprescue.dsh.errors import SessionAccessError, SessionFormatError, TornTailError
from looprescue.dsh.frames import is_zstd_file, iter_frames


@dataclass(frozen=True, slots=True)
class Line:
    """One line without its trailing newline.

    ``frame``/``frame_offset`` locate the zstd frame the line starts in (None for plain files);
    ``offset`` is the byte offset of the line in the decompressed text.
    """

    number: int
    raw: bytes
    offset: int
    frame: int | None
    frame_offset: int | None


def open_binary(path: Path):
    """Open for reading, turning OS errors into a SessionAccessError that names the file."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise SessionAccessError("file not found (moved or deleted?)", path=path) from None
    except PermissionError:
        raise SessionAccessError("permission denied", path=path) from None
    except IsADirectoryError:
        raise SessionAccessError("is a directory, expected a session log file", path=path) from None
    except OSError as err:
        raise SessionAccessError(f"cannot open: {err.strerror or err}", path=path) from None


def detect_encoding(path: Path) -> str:
    """'zstd' or 'plain', by content (magic bytes), not by file name."""
    try:
        return "zstd" if is_zstd_file(path) else "plain"
    except FileNotFoundError:
        raise SessionAccessError("file not found (moved or deleted?)", path=path) from None
    except PermissionError:
        raise SessionAccessError("permission denied", path=path) from None
    except OSError as err:
        raise SessionAccessError(f"cannot open: {err.strerror or err}", path=path) from None


def iter_lines(path: Path, encoding: str) -> Iterator[Line]:
    """Yield every complete line. A torn tail raises TornTailError after the good lines."""
    with open_binary(path) as fh:
        if encoding == "zstd":
            yield from _zstd_lines(path, fh)
        else:
            yield from _plain_lines(path, fh)


def _zstd_lines(path: Path, fh) -> Iterator[Line]:
    number = 0
    text_offset = 0
    carry = b""
    carry_start: tuple[int, int, int] | None = None  # frame, frame offset, text offset
    for frame in iter_frames(path, fh):
        if not frame.complete:
            salvageable = frame.content.count(b"\n")
            raise TornTailError(
                f"file ends inside frame {frame.index} (a partial append: {frame.size} bytes, "
                f"{salvageable} complete lines decodable); run `looprescue repair`",
                path=path,
                frame=frame.index,
                offset=frame.offset,
                line=number + 1,
            )
        content = frame.content
        if (frame.index == 0 and content.count(b"\n") != 1) or (
            frame.index == 0 and not content.endswith(b"\n")
        ):
            raise SessionFormatError(
                "first frame is not exactly one header line",
                path=path,
                frame=0,
                offset=0,
                line=1,
            )
        start = 0
        while True:
            end = content.find(b"\n", start)
            if end < 0:
                break
            piece = content[start:end]
            if carry:
                frame_index, frame_offset, offset = carry_start  # type: ignore[misc]
                piece = carry + piece
                carry = b""
            else:
                frame_index, frame_offset, offset = frame.index, frame.offset, text_offset
            number += 1
            yield Line(number, piece, offset, frame_index, frame_offset)
            text_offset = offset + len(piece) + 1
            start = end + 1
        if start < len(content):
            if not carry:
                carry_start = (frame.index, frame.offset, text_offset)
            carry += content[start:]
    if carry:
        frame_index, frame_offset, offset = carry_start  # type: ignore[misc]
        raise TornTailError(
            "the last line is truncated (no newline at the end of the last frame)",
            path=path,
            frame=frame_index,
            offset=frame_offset,
            line=number + 1,
        )


def _plain_lines(path: Path, fh) -> Iterator[Line]:
    offset = 0
    for number, raw in enumerate(fh, start=1):
        if not raw.endswith(b"\n"):
            raise TornTailError(
                "the last line is truncated (no newline at end of file)",
                path=path,
                offset=offset,
                line=number,
            )
        yield Line(number, raw[:-1], offset, None, None)
        offset += len(raw)
