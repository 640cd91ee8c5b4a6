"""Rule ``pool``: recent sentences are drawn from a handful of recurring short phrases.

Catches reshuffled bleeds such as ``好。/输出。/Go./OK./Let me write.`` that have no exact
period. Over the last ``poolWindow`` counted sentences, at least ``poolMinCoverage`` of them must
be short phrases that occur at least twice in the window, the pool of such phrases must be a
handful (``poolMaxPhrases``) and at least ``poolMinDistinct`` phrases must rotate (one phrase
alone is a cycle, not a pool).

Prune point: the first repeated phrase of the current streak. The first appearance of the
batch is kept, as the first copy of a cycle is, and that is what lets the detector promise a
safe watermark: text is only held back once a phrase starts repeating.
"""

from __future__ import annotations

from collections import deque

from looprescue.config import DetectorConfig
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.streak import FirstChars, RepeatStreak
from looprescue.detect.text import LONG_SENTENCE, excerpt, normalize_phrase


class PoolRule:
    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._window_size = cfg.poolWindow
        self._need = cfg.poolMinCoverage * cfg.poolWindow
        self._max_phrases = cfg.poolMaxPhrases
        self._min_distinct = cfg.poolMinDistinct
        self._max_chars = cfg.poolMaxPhraseChars
        # (phrase or None for a long sentence, start offset)
        self._window: deque[tuple[str | None, int]] = deque()
        self._counts: dict[str, int] = {}
        self._covered = 0  # window sentences whose phrase occurs >= 2 times in the window
        self._pool_size = 0  # distinct phrases occurring >= 2 times
        self._streak = RepeatStreak(cfg.poolMinCoverage)
        self._first_chars = FirstChars()  # of the short phrases in the window

    def _inc(self, phrase: str) -> None:
        self._first_chars.add(phrase)
        n = self._counts.get(phrase, 0) + 1
        self._counts[phrase] = n
        if n == 2:
            self._covered += 2
            self._pool_size += 1
        elif n > 2:
            self._covered += 1

    def _dec(self, phrase: str) -> None:
        self._first_chars.remove(phrase)
        n = self._counts[phrase] - 1
        if n == 0:
            del self._counts[phrase]
        else:
            self._counts[phrase] = n
        if n == 1:
            self._covered -= 2
            self._pool_size -= 1
        elif n >= 2:
            self._covered -= 1

    def on_sentence(self, sentence: str, start: int, end: int) -> Hit | None:
        key = None
        if sentence is not LONG_SENTENCE:
            phrase = normalize_phrase(sentence)
            if not phrase:
                return None
            if len(phrase) <= self._max_chars:
                key = phrase
        if key is None:
            self._streak.add(False, start)
        else:
            self._streak.add(key in self._counts, start)
            self._inc(key)
        window = self._window
        window.append((key, start))
        if len(window) > self._window_size:
            old = window.popleft()[0]
            if old is not None:
                self._dec(old)
        if (
            len(window) == self._window_size
            and self._covered >= self._need
            and self._min_distinct <= self._pool_size <= self._max_phrases
            and self._streak.start is not None
        ):
            return self._hit(end)
        return None

    def _hit(self, end: int) -> Hit:
        pool = sorted(
            (p for p, n in self._counts.items() if n >= 2), key=lambda p: -self._counts[p]
        )
        first = next(s for p, s in self._window if p is not None and self._counts[p] >= 2)
        return Hit(
            rule="pool",
            channel=self._channel,
            prune_offset=max(first if self._streak.start is None else self._streak.start, first),
            loop_start=first,
            fired_at=end,
            repeats=round(self._covered / max(1, len(pool)), 2),
            period=None,
            evidence=excerpt(" / ".join(pool[:8])),
        )

    def safe_offset(self, tail: str, tail_start: int, end: int) -> int:
        """Earliest offset a future pool hit could prune, given the unfinished sentence."""
        if self._streak.start is not None:
            return self._streak.start
        if not tail.strip():
            return end
        head = normalize_phrase(tail)
        if not head or (
            head[0] in self._first_chars and any(p.startswith(head) for p in self._counts)
        ):
            return tail_start + (len(tail) - len(tail.lstrip()))
        return end
