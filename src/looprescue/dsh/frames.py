"""zstd frames of a session log: the frame values of the decoder, and writing new frames.

DSH appends one zstd frame per durable batch. Knowing the frames lets errors say exactly
which frame is corrupt or torn, and lets an editor copy the compressed bytes of untouched
frames verbatim.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from looprescue.dsh.decoder import ZSTD_MAGIC, Frame, compress_frame
from looprescue.dsh.lines import decode_file

__all__ = ["ZSTD_MAGIC", "Frame", "compress_frame", "iter_frames"]


def iter_frames(path: Path) -> Iterator[Frame]:
    """Yield each complete frame of ``path`` in order (skippable frames included).

    A frame that fails to decode raises SessionFormatError naming frame and byte offset; a
    file that ends inside a frame raises TornTailError after the complete ones.
    """
    for item in decode_file(path, "zstd"):
        if type(item) is Frame:
            yield item
