"""Rule ``pool``: recent sentences are drawn from a handful of recurring short phrases.

Catches reshuffled bleeds such as ``好。/输出。/Go./OK./Let me write.`` that have no exact
period. Over the last ``poolWindow`` counted sentences, at least ``poolMinCoverage`` of them must
be short phrases that occur at least twice in the window, and the pool of such phrases must be a
handful (``poolMaxPhrases``), at least ``poolMinDistinct`` of them. One phrase alone is enough by
default: its copies may differ in whitespace, which an exact cycle does not allow. Phrases are
compared with inner whitespace folded and a counter label in front dropped (``Day 3: Rest``),
so a counted list whose items come from a handful of words is a pool too.

Prune point: where the batch of phrases first appeared (``UnitRun.onset``), so no phrase of the
pool is kept. A new long sentence ends a pool: the onset is never before it, and that is what
lets the watermark release text as soon as a long sentence arrives. A long sentence that repeats
a recent one belongs to the loop (a notice the model keeps re-emitting) and does not end it.
"""

from __future__ import annotations

from collections import deque

from looprescue.config import DetectorConfig
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.streak import UnitRun
from looprescue.detect.text import LONG_SENTENCE, excerpt, normalize_phrase

# Sentences of the current run kept for finding the onset: a pool is confirmed within a window
# or two of its start.
HORIZON_WINDOWS = 3
# Coverage the batch keeps from its onset on: lower than the firing coverage, because a batch's
# first appearances include variants that never come back ("Let me output." once, then "Go.").
ONSET_COVERAGE = 0.5
# Recent long sentences remembered to tell a repeated one from a new one.
LONG_MEMORY = 64


def pool_horizon(cfg: DetectorConfig) -> int:
    """Sentences of the current run kept (and held back) while a pool may still form."""
    return HORIZON_WINDOWS * cfg.poolWindow


class PoolRule:
    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._window_size = cfg.poolWindow
        self._need = cfg.poolMinCoverage * cfg.poolWindow
        self._max_phrases = cfg.poolMaxPhrases
        self._min_distinct = cfg.poolMinDistinct
        self._min_chars = cfg.poolMinChars
        self._max_chars = cfg.poolMaxPhraseChars
        # (phrase or None for a long sentence, start offset)
        self._window: deque[tuple[str | None, int]] = deque()
        self._counts: dict[str, int] = {}
        self._covered = 0  # window sentences whose phrase occurs >= 2 times in the window
        self._pool_size = 0  # distinct phrases occurring >= 2 times
        self._run = UnitRun(ONSET_COVERAGE, cfg.poolMaxPhrases, pool_horizon(cfg))
        self._long_seen: dict[str, None] = {}  # insertion-ordered: oldest first

    def _inc(self, phrase: str) -> None:
        n = self._counts.get(phrase, 0) + 1
        self._counts[phrase] = n
        if n == 2:
            self._covered += 2
            self._pool_size += 1
        elif n > 2:
            self._covered += 1

    def _dec(self, phrase: str) -> None:
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
        phrase = "" if sentence is LONG_SENTENCE else normalize_phrase(sentence)
        if sentence is LONG_SENTENCE or len(phrase) > self._max_chars:
            key = None
            self._run.add(phrase if self._seen_long(phrase) else None, start)
        elif phrase:
            key = phrase
            self._run.add(key, start)
            self._inc(key)
        else:
            return None  # punctuation only: not a unit
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
        ):
            members = {p for p, n in self._counts.items() if n >= 2}
            onset = self._run.onset(members)
            if onset is not None and end - onset >= self._min_chars:
                return self._hit(onset, end, members)
        return None

    def _seen_long(self, phrase: str) -> bool:
        """Whether a long sentence repeats a recent one (remembering it either way)."""
        if not phrase:
            return False  # too long to have been kept: treated as new
        seen = self._long_seen
        if phrase in seen:
            return True
        seen[phrase] = None
        if len(seen) > LONG_MEMORY:
            del seen[next(iter(seen))]
        return False

    def _hit(self, onset: int, end: int, members: set[str]) -> Hit:
        pool = sorted(members, key=lambda p: (-self._counts[p], p))
        return Hit(
            rule="pool",
            channel=self._channel,
            prune_offset=onset,
            loop_start=onset,
            fired_at=end,
            repeats=round(self._covered / max(1, len(pool)), 2),
            period=None,
            evidence=excerpt(" / ".join(pool[:8])),
        )

    def safe_offset(self, tail: str, tail_start: int, end: int) -> int:
        """Earliest offset a future pool hit could prune, given the unfinished sentence."""
        held = self._run.hold_from()
        if held is not None:
            return held
        # The unfinished sentence starts a run if it turns out short.
        if not tail.strip() or len(tail) > 4 * self._max_chars + 64:
            return end
        if len(normalize_phrase(tail)) <= self._max_chars:
            return tail_start + (len(tail) - len(tail.lstrip()))
        return end
