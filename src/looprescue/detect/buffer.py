"""The bounded text window a channel keeps: raw text and its digit-masked twin."""

from __future__ import annotations

import codecs

from looprescue.detect.text import mask_digits


def _fold_to_byte(err: UnicodeEncodeError) -> tuple[str, int]:
    # Chars beyond Latin-1 become one byte each (a hash into 128..255), so the byte view has
    # exactly one byte per char; a hash collision only yields a candidate that is then checked
    # against the real text.
    chunk = err.object[err.start : err.end]
    return "".join(chr(128 + (ord(ch) * 40503 >> 3) % 128) for ch in chunk), err.end


codecs.register_error("looprescue-fold", _fold_to_byte)


class TextWindow:
    """The text of a channel from ``keep`` chars before the last checkpoint on.

    Deltas are only collected in ``pending`` (the channel appends to it directly: that is the
    per-delta hot path); ``sync`` joins them when a rule needs the text. Trimming happens in
    blocks, so the copy it costs is paid once per ``slack`` chars: amortized O(1) per char,
    and memory stays bounded.
    """

    __slots__ = ("base", "end", "keep", "masked", "masked_bytes", "pending", "raw", "slack")

    def __init__(self, keep: int, slack: int = 2048) -> None:
        self.keep = keep
        self.slack = slack
        self.raw = ""
        self.masked = ""
        # The masked text folded to one byte per char: substring search on bytes is several
        # times faster than on a str holding CJK text, and such searches are the rules' and the
        # watermark's main cost. Matches found there are confirmed on ``masked``.
        self.masked_bytes = bytearray()
        self.base = 0  # absolute offset of raw[0]
        self.end = 0  # absolute offset after the last char received
        self.pending: list[str] = []  # deltas received but not joined yet

    def sync(self) -> None:
        """Join the deltas received since the last call into the held text."""
        if not self.pending:
            return
        new = "".join(self.pending)
        self.pending.clear()
        # Drop the attribute's reference first so CPython can grow the string in place.
        raw, self.raw = self.raw, ""
        raw += new
        new_masked = mask_digits(new)
        masked, self.masked = self.masked, ""
        masked += new_masked
        self.raw, self.masked = raw, masked
        self.masked_bytes += new_masked.encode("latin-1", "looprescue-fold")

    def trim(self, done: int) -> None:
        """Forget text more than ``keep`` chars behind ``done`` (the offset rules have reached).

        Rules never look further back than ``keep`` from the checkpoint they run at, so what
        they see does not depend on when trimming happened (i.e. on the chunking)."""
        excess = done - self.keep - self.base
        if excess > self.slack:
            self.raw = self.raw[excess:]
            self.masked = self.masked[excess:]
            del self.masked_bytes[:excess]
            self.base += excess

    def rfind_masked(self, start: int, stop: int, lo: int, hi: int) -> int:
        """Like ``masked.rfind(masked[start:stop], lo, hi)`` (window-relative offsets)."""
        data, masked = self.masked_bytes, self.masked
        needle, text = data[start:stop], masked[start:stop]
        lo = max(lo, 0)
        while True:
            found = data.rfind(needle, lo, hi)
            if found < 0 or masked.startswith(text, found):
                return found
            hi = found + len(needle) - 1  # a hash collision: look further back

    def slice(self, start: int, stop: int) -> str:
        """Raw text between two absolute offsets (clipped to what is still held)."""
        return self.raw[max(0, start - self.base) : max(0, stop - self.base)]
