"""Helpers for detector tests: stream text in chunks and collect what the detector says."""

from __future__ import annotations

from collections.abc import Iterable

from looprescue.config import DetectorConfig
from looprescue.detect import Hit, StreamDetector


def stream(
    text: str, channel: str = "reasoning", sizes: Iterable[int] = (3,), config=None
) -> Hit | None:
    """Feed ``text`` in deltas whose sizes cycle through ``sizes``; flush at the end."""
    detector = StreamDetector(config or DetectorConfig(), watch="both")
    sizes = list(sizes)
    pos, i = 0, 0
    while pos < len(text):
        step = sizes[i % len(sizes)]
        hit = detector.feed(channel, text[pos : pos + step])
        pos += step
        i += 1
        if hit is not None:
            return hit
    return detector.flush(channel)


def fires(text: str, channel: str = "reasoning", config=None) -> bool:
    return stream(text, channel, config=config) is not None
