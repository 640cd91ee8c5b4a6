"""Rule ``parrot``: a continuation's answer writes out a sentence of the correction it was sent.

A resumed stream answers a request whose last user turn is the proxy's correction ("your
previous response started repeating itself…, continue without repeating…"). A model that
copies a sentence of it into its answer is not doing the task: it is repeating its
instructions, a small model often over and over (``同一段内容被反复输出了约 43 次…`` three times
in one answer), and the user would see the proxy's words as the model's. The cut is where the
copied sentence begins; another continuation would be sent the same words, so the engine
finishes the response there.

Only whole sentences of at least ``ECHO_SENTENCE_CHARS`` chars count (``rescue.marker``), and
the correction's tag, ``[looprescue]``; and only in the answer: reasoning restating its
instructions is what reasoning does.
"""

from __future__ import annotations

from typing import Final

from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CHECKPOINT, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})


class ParrotRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("parrot",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, sentences: tuple[str, ...] = ()) -> None:
        self.channel = channel
        self._sentences = tuple(s for s in sentences if s)
        self._longest = max(map(len, self._sentences), default=0)
        self._scanned = 0  # sentences ending before this offset were looked for

    @property
    def active(self) -> bool:
        """Whether there is a correction to watch for (the detector asks the rule nothing
        else)."""
        return bool(self._sentences)

    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        """A copied sentence that ends by ``cp`` (its last char included unless ``final``)."""
        stop = cp if final else cp + 1
        start = max(win.base, self._scanned - self._longest + 1)
        self._scanned = stop
        text = win.slice(start, stop)
        found = [(at, s) for s in self._sentences if (at := text.find(s)) >= 0]
        if not found:
            return None
        at, sentence = min(found)
        offset = start + at
        return Hit(
            rule="parrot",
            channel=self.channel,
            prune_offset=offset,
            loop_start=offset,
            fired_at=stop,
            repeats=1.0,
            period=None,
            evidence=excerpt(sentence, 60),
        )

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Where a copied sentence not yet judged begins, or where the text's end could be the
        start of one."""
        end = win.end
        start = max(win.base, self._scanned - self._longest + 1)
        text = win.slice(start, end)
        tail_start = max(0, len(text) - self._longest + 1)
        held = end
        for sentence in self._sentences:
            at = text.find(sentence)
            if at >= 0:  # whole, and the next checkpoint cuts there
                held = min(held, start + at)
                continue
            first = sentence[0]
            at = text.find(first, tail_start)
            while at >= 0:
                if sentence.startswith(text[at:]):
                    held = min(held, start + at)
                    break
                at = text.find(first, at + 1)
        return held
