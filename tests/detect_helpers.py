"""Helpers for detector tests: stream text in chunks and collect what the detector says."""

from __future__ import annotations

import random
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


def released_and_hit(text: str, channel: str, seed: int = 0, config=None) -> tuple[int, Hit | None]:
    """(the furthest the watermark released, the hit), in random 2-6 char deltas, as the
    proxy asks for the watermark after every delta."""
    from looprescue.corpus import random_deltas

    detector = StreamDetector(config or DetectorConfig(), watch="both")
    released = 0
    for delta in random_deltas(text, random.Random(seed)):
        hit = detector.feed(channel, delta)
        if hit is not None:
            return released, hit
        released = max(released, detector.safe_offset(channel))
    return released, detector.flush(channel)


def fires(text: str, channel: str = "reasoning", config=None) -> bool:
    return stream(text, channel, config=config) is not None


# A short block of code that tests quote or repeat whole.
CODE_BLOCK = (
    "    handle = open_log(path)\n"
    "    for event in handle.events():\n"
    "        if event['type'] == 'tool/call':\n"
    "            calls.append(canonical(event['data']['arguments']))\n"
    "    handle.close()\n"
    "    assert calls == expected, describe(calls)\n"
    "    counts[path.name] = len(calls)\n"
)

# Healthy text before a loop: where the loop begins is known.
PREAMBLE = (
    "The failing test builds the session header before the lock is taken, so a second "
    "writer can slip in between. I will move the header write after the flock call.\n"
)


def derivation(seed: int) -> str:
    """Math reasoning as models write it: a short word line (``So:``, ``Simplify:``), which
    recurs, then two equations, again and again."""
    rng = random.Random(seed)
    lines = []
    for _ in range(40):
        x, y = rng.sample("abcxyz", 2)
        lines.append(rng.choice(["So:", "Simplify:", "Then:", "Substitute:", "Check:", "Hence:"]))
        lines.append(f"{rng.randint(2, 9)}{x} + {rng.randint(2, 30)}{y} = {rng.randint(10, 400)}")
        lines.append(f"{x} = {rng.randint(2, 90)}")
    return "\n\n".join(lines) + "\n\nThat gives the answer.\n"
