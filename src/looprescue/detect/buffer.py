"""The bounded text window a channel keeps: raw text and its digit-masked twin."""

from __future__ import annotations

from looprescue.detect.text import DIGIT_MASK


class TextWindow:
    """The last ``keep`` chars of a channel (plus not-yet-joined deltas).

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
        if not self._pending:
            return
        new = "".join(self._pending)
        self._pending.clear()
        raw = self.raw + new
        masked = self.masked + new.translate(DIGIT_MASK)
        excess = len(raw) - self.keep
        if excess > self.slack:
            raw = raw[excess:]
            masked = masked[excess:]
            self.base += excess
        self.raw, self.masked = raw, masked

    def slice(self, start: int, stop: int) -> str:
        """Raw text between two absolute offsets (clipped to what is still held)."""
        return self.raw[max(0, start - self.base) : max(0, stop - self.base)]
