"""The bounded text window a channel keeps: raw text and its digit-masked twin."""

from __future__ import annotations

from looprescue.detect.text import DIGIT_MASK


class TextWindow:
    """The text of a channel from ``keep`` chars before the last checkpoint on.

    Deltas are only collected on ``append``; ``sync`` joins them when a rule needs the text, so
    a tiny delta costs a list append. Trimming happens in blocks, so the copy it costs is paid
    once per ``slack`` chars: amortized O(1) per char, and memory stays bounded.
    """

    __slots__ = ("_pending", "base", "end", "keep", "masked", "raw", "slack")

    def __init__(self, keep: int, slack: int = 8192) -> None:
        self.keep = keep
        self.slack = slack
        self.raw = ""
        self.masked = ""
        self.base = 0  # absolute offset of raw[0]
        self.end = 0  # absolute offset after the last char received
        self._pending: list[str] = []

    def append(self, delta: str) -> None:
        self._pending.append(delta)
        self.end += len(delta)

    def sync(self) -> None:
        """Join the deltas received since the last call into the held text."""
        if not self._pending:
            return
        new = "".join(self._pending)
        self._pending.clear()
        self.raw += new
        self.masked += new.translate(DIGIT_MASK)

    def trim(self, done: int) -> None:
        """Forget text more than ``keep`` chars behind ``done`` (the offset rules have reached).

        Rules never look further back than ``keep`` from the checkpoint they run at, so what
        they see does not depend on when trimming happened (i.e. on the chunking)."""
        excess = done - self.keep - self.base
        if excess > self.slack:
            self.raw = self.raw[excess:]
            self.masked = self.masked[excess:]
            self.base += excess

    def slice(self, start: int, stop: int) -> str:
        """Raw text between two absolute offsets (clipped to what is still held)."""
        return self.raw[max(0, start - self.base) : max(0, stop - self.base)]
