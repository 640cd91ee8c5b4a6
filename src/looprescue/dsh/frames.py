"""Multi-frame zstd decoding, one frame at a time.

DSH appends one zstd frame per durable batch. Decoding frame by frame (instead of as one
stream) lets us say exactly which frame is corrupt or torn, and lets an editor copy the
compressed bytes of untouched frames verbatim.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

from looprescue.dsh.errors import SessionFormatError, TornTailError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_READ_SIZE = 1 << 16


@dataclass(frozen=True, slots=True)
class Frame:
    """One zstd frame: where it sits in the file and what it decodes to."""

    index: int
    offset: int
    size: int
    content: bytes
    complete: bool  # False: the file ends inside this frame (torn append)


def is_zstd_file(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == ZSTD_MAGIC


def iter_frames(path: Path, fh: BinaryIO | None = None) -> Iterator[Frame]:
    """Yield each frame of ``path`` in order.

    A frame that fails to decode (bad magic, corrupt block, checksum mismatch) raises
    SessionFormatError naming frame and byte offset. A frame cut off by the end of the file is
    yielded once with ``complete=False`` and whatever it decoded to; nothing follows it.
    """
    if fh is None:
        with open(path, "rb") as own:
            yield from iter_frames(path, own)
        return
    dctx = zstandard.ZstdDecompressor()
    pending = b""
    offset = 0
    index = 0
    while True:
        if len(pending) < 4:
            more = fh.read(_READ_SIZE)
            pending += more
            if not pending:
                return
            if len(pending) < 4 and not more:
                raise TornTailError(
                    f"file ends inside the header of frame {index} ({len(pending)} stray bytes)",
                    path=path,
                    frame=index,
                    offset=offset,
                )
            if len(pending) < 4:
                continue
        if pending[:4] != ZSTD_MAGIC:
            raise SessionFormatError(
                f"corrupt zstd session log: invalid frame magic at byte {offset}",
                path=path,
                frame=index,
                offset=offset,
            )
        decoder = dctx.decompressobj()
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                parts.append(decoder.decompress(pending))
            except zstandard.ZstdError as err:
                raise SessionFormatError(
                    f"corrupt zstd frame {index} starting at byte {offset}: {err}",
                    path=path,
                    frame=index,
                    offset=offset,
                ) from None
            if decoder.eof:
                rest = decoder.unused_data
                size += len(pending) - len(rest)
                pending = rest
                yield Frame(index, offset, size, b"".join(parts), True)
                break
            size += len(pending)
            pending = fh.read(_READ_SIZE)
            if not pending:
                yield Frame(index, offset, size, b"".join(parts), False)
                return
        offset += size
        index += 1


def compress_frame(content: bytes) -> bytes:
    """Encode one batch of lines with the frame flags DSH itself writes (checksum, no size)."""
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False)
    return cctx.compress(content)
