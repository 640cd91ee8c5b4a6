"""Rule ``pool``: recent sentences are drawn from a handful of recurring short phrases.

Catches reshuffled bleeds such as ``好。/输出。/Go./OK./Let me write.`` that have no exact period.
Over the last ``poolWindow`` counted sentences, at least ``poolMinCoverage`` of them must be
short phrases that occur at least twice in the window, and the pool of such phrases must be a
handful (``poolMaxPhrases``), at least ``poolMinDistinct`` of them. A window in which every
sentence recurs is a pool too when some of its sentences are wider than phrases, from a
handful all told (``So the answer is 3.``, then ``Wait, let me recount:
s-t-r-a-w-b-e-r-r-y.``, each said one of two ways, in no order): nothing new comes, though the
phrases alone fill only half the window. One phrase alone is enough
by default: its copies may differ in whitespace, which an exact cycle does not allow. Phrases
are compared with inner whitespace folded and a counter label in front dropped
(``Day 3: Rest``, ``[check 6] OK.``), so a labelled list whose items come from a handful of
words is a pool too, unless its labels count up by one (an answer key, a schedule: an
enumeration, which only the request bounds). Sentences end at full-width stops without any
space (``好。继续。输出。`` is three phrases), and so do clause marks after openers: a
sentence of openers strung together (``Wait, Wait, 嗯， Let me reconsider.``, each but the
last ``OPENER_CHARS`` wide) is one phrase each, while a song's line or openers before a clause
of content stay one sentence. Widths
count a CJK char as two (``poolMaxPhraseChars``, ``poolMinChars``): a Chinese sentence of 22
chars is no short phrase, and a pool of Chinese phrases fires after as much text as an English
one.

Prune point: where the batch of phrases first appeared (``UnitRun.onset``), so no phrase of the
pool is kept. That needs holding the batch back as it comes, which is done for very short phrases
(``HOLD_CHARS`` wide: ``输出。``, ``Let me write.``; a Chinese clause of a dozen chars is no such
phrase) only: a pool made of longer phrases alone ("I will check the config file.") is cut at
the start of the current streak of repeats instead, keeping each phrase's first appearance, as a
cycle keeps its first copy. When the batch began right after a sentence too wide to be held that
the loop says again (a block of a clause and short phrases), the cut moves to that sentence.

A new long sentence ends a pool: the onset is never before it, and that is what lets the
watermark release text as soon as a long sentence arrives (a sentence too long to keep, past
``4 * poolMaxPhraseChars + 64`` chars, counts as a new one). In the visible text a new structure
line (list item, table row, quote; a line of code in either channel) is no unit but comes
between units: no member, no repeat, and when longer than any phrase it ends a run in which
nothing came twice, as a long sentence does. While a run in which no phrase came twice waits
under an unfinished sentence or structure line that can only end as such a barrier, the run goes
out already (``_ends_run``): a heading is not held while the paragraph or the list under it is
written. A long sentence that repeats a recent one belongs to the loop (a notice the model keeps
re-emitting): it does not end it, and it counts in the streak of repeats, so a pool whose
repeats began before its short phrases made up a batch is cut where they began; when the batch
began right after a long sentence the loop says again, it is cut at that sentence. A sentence no
longer than a phrase in chars (a CJK one up to twice as wide) does not end a run either.

Not a pool: healthy reasoning whose short sentences recur now and then (``Wait.``, ``OK.``), a
checklist that is said once, and a pool that a long new sentence ends before it fills
``poolMinChars``: the model recovered. Nor a quoted log whose lines differ only in a number
that takes a few values (``heartbeat ok (latency 7 ms)``): phrases the same but for their
numbers, three or more, are one log line, and do not count as members when the pool is about
to fire (``measurements``). Nor a song's chorus: three lines or more sung in one order each
time, a verse between two of its copies, and no more than six copies (``refrain``); nor one
letter sent to a few people, a new salutation (``王芳，你好：``) standing for the verse. A formula
or a line of code (``a + 4d = 448``, ``text.notation``; a final answer framed in LaTeX,
``\\boxed{1}``, is none) is no phrase and no repeat, said again
or not, only a unit against the run's coverage: a derivation is not held as a run that could
become a pool, nor an equation restated as a streak of repeats.
"""

from __future__ import annotations

import re
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable
from itertools import islice, pairwise
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import (
    HOLD_CHARS,
    ONSET_COVERAGE,
    REPEAT_WITHIN,
    pool_horizon,
)
from looprescue.detect.nearcopy import with_renumbered_heading
from looprescue.detect.rule import SENTENCE, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import CLAUSE_MARK, CLAUSE_MARKS, text_width
from looprescue.detect.streak import RepeatStreak, UnitRun
from looprescue.detect.text import (
    LABEL_ENDS,
    LONG_SENTENCE,
    STRUCTURE_LINE,
    counter_label,
    excerpt,
    has_alnum,
    normalize_phrase,
    notation,
)

_FEEDS: Final = frozenset({SENTENCE, WATERMARK})

# (HOLD_CHARS: a longer short sentence still counts toward a pool, but a run of them is
# released at once, so healthy reasoning, "Let me check the caller first.", is not held.)
# An unfinished sentence whose phrase is this long can no longer turn out a held phrase: it is
# not asked again until the next sentence begins.
FREE_AFTER: Final = HOLD_CHARS + 24
# Units a batch judged alone holds at least (see PoolRule._young_batch): as many copies as a
# cycle of a short unit needs (cycleShortRepeats).
YOUNG_BATCH_UNITS: Final = 10
YOUNG_BATCH_COPIES: Final = 3
YOUNG_BATCH_PHRASES: Final = 3
# Recent long sentences remembered to tell a repeated one from a new one.
LONG_MEMORY: Final = 64
# Sentences whose phrase is remembered: a pool repeats a handful of them hundreds of times, and
# normalising one costs more than looking it up. Forgotten all at once when full (bounded).
PHRASES_REMEMBERED: Final = 256


def window_keys(recent: deque[tuple[str | None, int, str]], size: int) -> list[str | None]:
    """The keys of the last ``size`` recent units, newest first."""
    return [unit[0] for unit in islice(reversed(recent), size)]


# A line said with a number that varies (``heartbeat ok (latency 7 ms)``, then ``4 ms``) is one
# line of a log, however few values the number takes: phrases the same but for their numbers,
# this many of them or more, are no rotation of phrases (numbers that move on are the counter
# rule's). Two are not enough: a loop may alternate ``Step 1.`` and ``Step 2.``.
MEASURED_VALUES: Final = 3
_NUMBER: Final = re.compile(r"[0-9]+")


def measurements(phrases: Iterable[str]) -> set[str]:
    """The phrases that are one line of words with a number that varies (see MEASURED_VALUES)."""
    by_line: dict[str, list[str]] = {}
    for phrase in phrases:
        if _NUMBER.search(phrase) is not None:
            line = _NUMBER.sub("#", phrase)
            if any(c.isalpha() for c in line):
                by_line.setdefault(line, []).append(phrase)
    return {p for same in by_line.values() if len(same) >= MEASURED_VALUES for p in same}


# A refrain has at least this many lines, at least once this many new lines (a verse) between
# two of its copies, and is sung at most this many times in a window (a song's chorus comes
# back a handful of times; a rotation with a new sentence or two between its turns goes on).
REFRAIN_LINES: Final = 3
VERSE_LINES: Final = 2
REFRAIN_COPIES: Final = 6


def refrain(
    members: set[str], keys: list[str | None], labels: frozenset[str] = frozenset()
) -> bool:
    """Whether the members are a refrain: ``REFRAIN_LINES`` phrases or more sung in one order
    each time (each member is followed by one member only, when a member follows it), with a
    verse (``VERSE_LINES`` units or more that are no members) between two of its copies, and
    no more than ``REFRAIN_COPIES`` copies. A song's chorus, not a pool: a pool reshuffles
    its phrases, and a rotation said over and over has nothing new between its turns, or
    comes back more often (a block said again back to back is a cycle's). A new label line
    (``labels``: ``Dear Ann,``, ``王芳，你好：``) is a verse of its own: one letter sent to a few
    people under their own salutations. ``keys``: the units judged (the window's, the run's),
    newest first."""
    if len(members) < REFRAIN_LINES:
        return False
    if any(keys.count(member) > REFRAIN_COPIES for member in members):
        return False
    follows: dict[str, str] = {}
    verse = 0
    gap = -1  # units since the last member met (-1: none met yet, so no gap between copies)
    later: str | None = None  # the unit after the current one (keys run newest first)
    for key in keys:
        if key in members:
            if later is not None and later in members and follows.setdefault(key, later) != later:
                return False  # a member followed by two different ones: reshuffled
            verse, gap = max(verse, gap), 0
        elif gap >= 0:
            gap += VERSE_LINES if key in labels else 1
        later = key
    return verse >= VERSE_LINES


# A LaTeX command at the end of the text, not closed yet: ``\``, ``\boxed``, ``\boxed{1``.
_UNFINISHED_COMMAND: Final = re.compile(r"\\[a-z]*(?:\{[^{}]*)?$")
# Labelled units counting up from a batch's onset, at least this many, are an enumeration.
ENUMERATED_ITEMS: Final = 3


class PoolRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("pool",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._window_size: int = cfg.poolWindow
        self._need: float = cfg.poolMinCoverage * cfg.poolWindow
        self._coverage: float = cfg.poolMinCoverage
        self._max_phrases: int = cfg.poolMaxPhrases
        self._min_distinct: int = cfg.poolMinDistinct
        self._min_chars: int = cfg.poolMinChars
        self._max_chars: int = cfg.poolMaxPhraseChars
        # Recent units: (phrase or None for a long sentence, start offset, the sentence as
        # written). The last poolWindow of them are the window; the rest reach back as far as
        # a run's onset can, and the unit before it.
        self._recent: deque[tuple[str | None, int, str]] = deque(
            maxlen=pool_horizon(cfg) + cfg.poolWindow + 1
        )
        self._counts: dict[str, int] = {}
        self._covered = 0  # window sentences whose phrase occurs >= 2 times in the window
        self._pool_size = 0  # distinct phrases occurring >= 2 times
        self._run = UnitRun(ONSET_COVERAGE, cfg.poolMaxPhrases, pool_horizon(cfg), REPEAT_WITHIN)
        self._long_seen: dict[str, None] = {}  # insertion-ordered: oldest first
        self._long_sorted: list[str] = []  # the same phrases in order, to find a prefix fast
        # phrases longer than HOLD_CHARS: a pool of them is cut at its first repeat
        self._repeats = RepeatStreak(cfg.poolMinCoverage)
        self._free_tail = -1  # start of an unfinished sentence that can hold nothing back
        # the unfinished sentence read for openers strung together: its start, how far its
        # ended clauses were read, and what they say (``_may_be_openers``)
        self._strung_tail, self._strung_from, self._strung = -1, 0, _MAYBE
        self._barrier_tail = -1  # start of an unfinished sentence known to end the run
        # the last long new sentence (it ended the run), whether the text said it again since,
        # and where the first phrase after it began (-1: none yet)
        self._barrier: tuple[int, str] | None = None
        self._barrier_said = False
        self._after_barrier = -1
        # sentence -> (normalize_phrase(sentence), the sentence's CJK chars, the phrase's width)
        self._phrase_of: dict[str, tuple[str, int, int]] = {}
        # The CJK chars of the sentences so far, at each recent sentence start: poolMinChars
        # is a width (a CJK char counted as two, ``shape.text_width``), as the detector's
        # other bounds are, so a pool of Chinese phrases fires after as much text as an
        # English one.
        # Noted only where a sentence has CJK chars (English text notes nothing): the starts
        # of such sentences and the count up to and including each.
        self._width = 0
        self._width_starts: list[int] = []
        self._width_base = 0  # the count before the oldest start kept
        self._width_counts: list[int] = []
        self._width_keep = pool_horizon(cfg) + cfg.poolWindow

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

    def _whole_window(self) -> bool:
        """Whether every unit of the window recurs in it, some of them sentences too wide for
        phrases, from a handful: the model draws a few phrases and a sentence or two again and
        again in no order (``So the answer is 3.``, ``Wait, let me recount:
        s-t-r-a-w-b-e-r-r-y.``). Healthy text that says a longer sentence again now and then
        (a case checked, then the next one) says something new between. Some of it must be
        phrases short enough to be held (``HOLD_CHARS``), said twice since the last new
        sentence: sentences alone, a block of them said again with a word changed, are
        ``drift``'s and ``rehash``'s, which keep one copy of the block."""
        if not self._run.has_recurring():
            return False
        counts: dict[str, int] = {}
        wide = False
        for key, _, sentence in islice(reversed(self._recent), self._window_size):
            if key is None:
                # (asked only while phrases recur in the window: rare in most text)
                key = self._wide_phrase(sentence)
                if key is None:
                    return False  # a sentence too long to keep, or a formula: no rotation
                wide = True
            counts[key] = counts.get(key, 0) + 1
        return wide and len(counts) <= self._max_phrases and all(n >= 2 for n in counts.values())

    def _wide_phrase(self, sentence: str) -> str | None:
        """The phrase of a sentence too wide for one, or None for a unit that has none to say
        again (a sentence too long to keep, a formula)."""
        if sentence is LONG_SENTENCE:
            return None
        known = self._phrase_of.get(sentence)
        phrase = known[0] if known is not None else normalize_phrase(sentence)
        return None if notation(phrase) else phrase

    def _note_width(self, start: int, wide: int) -> None:
        """Note a sentence from ``start`` with ``wide`` CJK chars (counted once more)."""
        if wide:
            self._width += wide
            starts = self._width_starts
            starts.append(start)
            self._width_counts.append(self._width)
            if len(starts) > 2 * self._width_keep:
                # an onset is never older than the run's horizon: the older half goes
                self._width_base = self._width_counts[self._width_keep - 1]
                del starts[: self._width_keep]
                del self._width_counts[: self._width_keep]

    def _wide(self, onset: int, end: int) -> int:
        """The width of the text from a recent sentence start ``onset`` to ``end``."""
        before = bisect_left(self._width_starts, onset)  # CJK sentences that start earlier
        counted = self._width_counts[before - 1] if before else self._width_base
        return end - onset + self._width - counted

    def on_sentence(self, sentence: str, start: int, end: int) -> Hit | None:
        if sentence is STRUCTURE_LINE or sentence is LONG_SENTENCE:
            return self._on_unit(sentence, start, end)
        mark = CLAUSE_MARK.search(sentence)
        if mark is None or mark.start() > OPENER_CHARS:
            # (most sentences: no clause mark, or a first clause wider than an opener)
            return self._on_unit(sentence, start, end)
        pieces = _short_clauses(sentence)
        if pieces is None:
            return self._on_unit(sentence, start, end)
        # Openers strung together by clause marks (``Wait, Wait, 嗯， Let me reconsider.``):
        # each is a unit, as a pool of them strings them.
        last = len(pieces) - 1
        for i, (offset, piece) in enumerate(pieces):
            piece_end = end if i == last else start + offset + len(piece)
            hit = self._on_unit(piece, start + offset, piece_end)
            if hit is not None:
                return hit
        return None

    def _on_unit(self, sentence: str, start: int, end: int) -> Hit | None:
        if sentence is STRUCTURE_LINE:
            # A new line of structure: between the run's units, and none of them, and no repeat
            # (a heading said in every section is no streak through the lists under it). A
            # long one is new text that ends a run in which nothing came twice, as a long
            # sentence does; once a phrase came twice a batch may be forming, and a block of it
            # said again may hold a new item (a meal plan whose days differ in one dish).
            # (Its length: the line, its newline taken off.)
            long = end - start - 1 > self._max_chars
            self._run.add(None, start, barrier=long and not self._run.has_recurring())
            self._repeats.add(False, start)
            return None
        if sentence is LONG_SENTENCE:
            phrase, phrase_width = "", 0
        else:
            known = self._phrase_of.get(sentence)
            if known is None:
                if len(self._phrase_of) >= PHRASES_REMEMBERED:
                    self._phrase_of.clear()
                normal = normalize_phrase(sentence)
                # (normalising drops whitespace and marks, and a counter label, which has
                # CJK chars rarely: the phrase has the sentence's)
                cjk = 0 if sentence.isascii() else text_width(sentence) - len(sentence)
                known = self._phrase_of[sentence] = (normal, cjk, len(normal) + cjk)
            phrase, phrase_width = known[0], known[2]
            self._note_width(start, known[1])
        # phrase lengths are widths too: a Chinese sentence of 22 chars says as much as an
        # English one of 44, and is no short phrase
        if sentence is LONG_SENTENCE or phrase_width > self._max_chars:
            key = None
            said = self._seen_long(phrase)
            # a sentence no longer than a phrase in chars (a CJK one up to twice as wide)
            # does not end a run: a small model's garbled pool mixes such sentences in
            barrier = not said and (sentence is LONG_SENTENCE or len(phrase) > self._max_chars)
            self._run.add(None, start, barrier=barrier)
            if barrier:
                self._barrier, self._barrier_said, self._after_barrier = (start, phrase), False, -1
            elif said and self._barrier is not None and phrase == self._barrier[1]:
                self._barrier_said = True
            # a long sentence said again is the loop's too: a pool of sentences of several
            # widths (a block said again) is cut where its repeats began; a formula or code
            # said again is no such repeat (an equation restated in a derivation)
            again = said and not notation(phrase)
            self._repeats.add(again, start)
        elif phrase and notation(phrase):
            # a formula or a line of code: no phrase of a pool, and no repeat (an equation
            # restated), but a unit between the run's, against its coverage
            key = None
            again = False
            self._run.add(None, start)
            self._repeats.add(False, start)
        elif phrase:
            key = phrase
            if self._after_barrier < 0:
                self._after_barrier = start
            # only a very short phrase can open (or carry) a held run: see HOLD_CHARS (a width:
            # a Chinese sentence of 15 chars is a clause, no 好。 or 输出。)
            self._run.add(key if phrase_width <= HOLD_CHARS else None, start)
            seen = self._counts.get(key, 0)
            again = seen > 0
            self._repeats.add(again, start)
            self._counts[key] = seen + 1
            if seen == 1:
                self._covered += 2
                self._pool_size += 1
            elif seen > 1:
                self._covered += 1
        else:
            return None  # punctuation only: not a unit
        recent = self._recent
        recent.append((key, start, sentence))
        if len(recent) > self._window_size:
            old = recent[-self._window_size - 1][0]  # the unit that just left the window
            if old is not None:
                self._dec(old)
        if len(recent) >= self._window_size and (
            (
                self._covered >= self._need
                and self._min_distinct <= self._pool_size <= self._max_phrases
            )
            # (a window whose every unit recurs ends with one said before)
            or (again and self._covered >= 2 and self._whole_window())
        ):
            # an onset is a unit of the run or the streak's start: while both are younger than
            # poolMinChars there is nothing to fire yet, and no need to look for it
            earliest = end
            held, streak = self._run.hold_from(), self._repeats.start
            if held is not None and held < earliest:
                earliest = held
            if streak is not None and streak < earliest:
                earliest = streak
            if (
                2 * (end - earliest) < self._min_chars
                or self._wide(earliest, end) < self._min_chars
            ):
                return None
            members = {p for p, n in self._counts.items() if n >= 2}
            # The batch's onset: a phrase that recurs in the run belongs to the batch even when
            # its copies have left the window (a rare phrase of a skewed pool opens it).
            onset = self._run.onset(self._with_strung(members | self._run.recurring()))
            streak = self._repeats.start
            # a pool of longer phrases is cut at its repeats; so is a pool of phrases of both
            # kinds whose repeats began before the short ones made up a batch
            batch = not (onset is None or (streak is not None and streak < onset))
            if not batch:
                onset = streak
            if onset is not None and self._wide(onset, end) >= self._min_chars:
                keys = window_keys(recent, self._window_size)
                if not self._no_pool(members, keys, self._need, onset):
                    return self._hit(onset, end, members, batch)
        elif key is not None:
            return self._young_batch(end)
        return None

    def _young_batch(self, end: int) -> Hit | None:
        """A batch that fills ``poolMinChars`` before the window is mostly its own: a marker
        line said again and again with its punctuation changing (``**Final answer**.``,
        ``**Final answer**!``) is 20-odd chars a copy, and the window would take 23 of them.
        The batch is judged alone, from its start, as the window would be: at least
        ``YOUNG_BATCH_UNITS`` units, ``poolMinCoverage`` of them recurring, a handful of
        phrases (``YOUNG_BATCH_PHRASES``) said ``YOUNG_BATCH_COPIES`` times each on average. A
        block of several sentences said again and again is a cycle's to judge, which keeps its
        first copy, and a larger pool fills the window soon enough. Judged over the held run,
        else over the streak of repeats for a marker too wide to be held (``_young_streak``)."""
        held = self._run.hold_from()
        if held is not None and self._wide(held, end) >= self._min_chars:
            covered, units, phrases = self._run.recurring_share()
            if self._young(covered, units, phrases):
                members = self._run.recurring()
                onset = self._run.onset(self._with_strung(members))
                if onset is not None and self._wide(onset, end) >= self._min_chars:
                    keys = self._run.keys()[::-1]  # newest first
                    if not self._no_pool(members, keys, self._coverage * units, onset):
                        return self._hit(onset, end, members, True)
        return self._young_streak(end)

    def _young(self, covered: int, units: int, phrases: int) -> bool:
        """Whether units, ``covered`` of them recurring, of ``phrases`` make a young batch."""
        return (
            units >= YOUNG_BATCH_UNITS
            and covered >= self._coverage * units
            and covered >= YOUNG_BATCH_COPIES * phrases
            and self._min_distinct <= phrases <= min(self._max_phrases, YOUNG_BATCH_PHRASES)
        )

    def _young_streak(self, end: int) -> Hit | None:
        """The same judgement over the streak of repeats, for phrases too wide to be held as
        they come (``**Final answer 最终答案**``, 21 wide) whose copies are not written the
        same (a cycle follows copies that are, and finds the near-copies that led into them):
        cut where the repeats began, so each phrase's first appearance stays, as a pool of
        longer phrases is cut."""
        streak = self._repeats.start
        if streak is None or self._wide(streak, end) < self._min_chars:
            return None
        counts = self._counts
        covered = units = 0
        members: set[str] = set()
        written: dict[str, str] = {}  # a member phrase, as one copy wrote it
        keys: list[str | None] = []
        varied = False
        for key, start, sentence in islice(reversed(self._recent), self._window_size):
            if start < streak:
                break
            units += 1
            keys.append(key)
            if key is not None and counts[key] >= 2:
                covered += 1
                members.add(key)
                varied = varied or written.setdefault(key, sentence) != sentence
        if not varied or not self._young(covered, units, len(members)):
            return None
        if self._no_pool(members, keys, self._coverage * units, streak):
            return None
        return self._hit(streak, end, members, False)

    def _no_pool(self, members: set[str], keys: list[str | None], need: float, onset: int) -> bool:
        """Whether what would fire from ``onset`` is healthy text that repeats short units:
        a log line with a varying number, a song's chorus, an enumeration of short answers.
        Asked only of a pool about to fire (``keys``: the units judged, newest first;
        ``need``: the recurring units they must hold)."""
        return (
            self._log_lines(members, keys, need)
            or refrain(members, keys, self._labels(onset))
            or self._enumerated(onset, members)
        )

    def _labels(self, since: int) -> frozenset[str]:
        """The keys of the units from ``since`` on written as a label line: a few words that
        end with a colon or a comma (``Dear Ann,``, ``王芳，你好：``)."""
        return frozenset(
            key
            for key, start, sentence in self._recent
            if key is not None and start >= since and sentence.rstrip()[-1:] in LABEL_ENDS
        )

    def _enumerated(self, since: int, members: set[str]) -> bool:
        """Whether the units from ``since`` on are an enumeration of short answers: every
        member's unit opens with a counter label, and the labels count up by one
        (``Statement 12: true.``, ``Statement 13: false.``; an answer key, a schedule). Only
        the request can bound such a list (``overrun``, ``counted``); a loop's labels stay or
        jump about."""
        numbers: list[int] = []
        for key, start, sentence in self._recent:
            if start < since:
                continue
            number = counter_label(sentence)
            if number is None:
                if key in members:
                    return False
                continue
            numbers.append(number)
        return len(numbers) >= ENUMERATED_ITEMS and all(
            later - earlier == 1 for earlier, later in pairwise(numbers)
        )

    def _log_lines(self, members: set[str], keys: Iterable[str | None], need: float) -> bool:
        """Whether the units (their ``keys``) fall short of ``need`` recurring ones, or of
        ``poolMinDistinct`` phrases, once the members that are one log line with a varying
        number (``measurements``) are left out. Asked only of a pool about to fire."""
        measured = measurements(members)
        if not measured:
            return False
        rest = members - measured
        return len(rest) < self._min_distinct or sum(k in rest for k in keys) < need

    def _with_strung(self, members: set[str]) -> set[str]:
        """``members`` and the run's units that string members together with clause marks:
        the first ``嗯，让我再想想。`` of a pool is read as one phrase (its opener has not been
        said alone yet), but it is the pool's, and the batch begins with it."""
        strung = set(members)
        run = self._run.keys()
        for key in run:
            if key is not None and key not in strung and CLAUSE_MARK.search(key) is not None:
                clauses = [normalize_phrase(m.group()) for m in _CLAUSE_PIECE.finditer(key)]
                if all(clause in members for clause in clauses if clause):
                    strung.add(key)
        return strung

    def batch_onset(self) -> int | None:
        """Where the batch of short phrases the text now ends in first appeared (None when
        there is none): a periodic loop of such phrases that took over from a reshuffled
        batch of them began there, and keeps none of it."""
        return self._run.onset(self._run.recurring())

    def _seen_long(self, phrase: str) -> bool:
        """Whether a long sentence repeats a recent one (remembering it either way)."""
        if not phrase:
            return False  # too long to have been kept: treated as new
        seen = self._long_seen
        if phrase in seen:
            return True
        seen[phrase] = None
        insort(self._long_sorted, phrase)
        if len(seen) > LONG_MEMORY:
            oldest = next(iter(seen))
            del seen[oldest]
            del self._long_sorted[bisect_left(self._long_sorted, oldest)]
        return False

    def _may_say_long_again(self, head: str) -> bool:
        """Whether the unfinished sentence (its phrase so far) can still turn out a recent long
        sentence said again, which starts a streak of repeats where it begins."""
        ordered = self._long_sorted
        at = bisect_left(ordered, head)
        return at < len(ordered) and ordered[at].startswith(head)

    def _hit(self, onset: int, end: int, members: set[str], batch: bool) -> Hit:
        """The hit cut at ``onset``: where the ``batch`` of held phrases began, or where the
        streak of repeats did (each phrase's first appearance kept)."""
        pool = sorted(members, key=lambda p: (-self._counts[p], p))
        lead_in = 0
        if self._barrier_said and onset == self._after_barrier and self._barrier is not None:
            # The batch began right after a long sentence that the loop said again: that
            # sentence opened the loop (a block said again whose first sentence is long). It
            # ended the run when it was new, so the watermark may have shown it: a lead-in.
            lead_in = onset - self._barrier[0]
            onset = self._barrier[0]
        elif batch:
            opener = self._wide_opener(onset)
            if opener is not None:
                lead_in, onset = onset - opener, opener
        return Hit(
            rule="pool",
            channel=self._channel,
            prune_offset=onset,
            loop_start=onset,
            fired_at=end,
            repeats=round(self._covered / max(1, len(pool)), 2),
            period=None,
            evidence=excerpt(" / ".join(pool[:8])),
            lead_in=lead_in,
        )

    def _wide_opener(self, onset: int) -> int | None:
        """Where the sentence right before ``onset`` begins, when it is too wide to be held as
        a phrase, too short to end the run, and the loop says it again: it opened the loop (a
        block of a clause-long sentence and short phrases, said again and again), as a long
        sentence said again does. Not held as it came, so a lead-in."""
        before: tuple[str | None, int, str] | None = None
        for unit in self._recent:
            if unit[1] >= onset:
                break
            before = unit
        if before is None or (before[0] is not None and text_width(before[0]) <= HOLD_CHARS):
            return None  # none, or a phrase the run would hold
        text = before[2]
        if any(start > onset and sentence == text for _, start, sentence in self._recent):
            return before[1]
        return None

    def settle(self, win: TextWindow, hit: Hit, rules: list[Rule]) -> Hit:
        """A block said again under a new heading began at the heading."""
        return with_renumbered_heading(win, hit)

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Earliest offset a future pool hit could prune, given the unfinished sentence (the
        text from the segmenter's ``sentence_from`` on)."""
        tail_start, end = segmenter.sentence_from, win.end
        held = self._run.hold_from()
        if (
            held is not None
            and tail_start != self._barrier_tail
            and not self._run.has_recurring()
            and self._ends_run(win, segmenter, tail_start, end)
        ):
            self._barrier_tail = tail_start
        if held is not None and tail_start != self._barrier_tail:
            return min(held, self._repeats.start if self._repeats.start is not None else held)
        if self._repeats.start is not None:
            return self._repeats.start
        if tail_start == self._free_tail:
            return end  # this sentence was already too long to become a phrase
        # The unfinished sentence opens a run if it turns out a very short phrase, and starts a
        # streak of repeats if it turns out a phrase the window already has or a long sentence
        # said again.
        tail = win.slice(tail_start, end)
        if not tail.strip():
            return end
        if self._may_be_openers(tail_start, tail):
            # it may end as openers strung together: a phrase each, the first held already
            return tail_start + (len(tail) - len(tail.lstrip()))
        if len(tail) > 4 * self._max_chars + 64:
            self._free_tail = tail_start
            return end
        folded = tail.strip().casefold()
        # (a LaTeX command still being written, ``\`` or ``\boxed{1``, is judged once it is
        # whole: ``\(`` and ``\boxed{1}`` frame a phrase, and what went out stays out)
        if notation(_UNFINISHED_COMMAND.sub("", folded)):
            return end  # a formula or code: it ends as no phrase and no repeat
        if len(folded) <= HOLD_CHARS and text_width(folded) <= HOLD_CHARS:
            # its phrase is no wider than this (normalising only drops and folds chars)
            return tail_start + (len(tail) - len(tail.lstrip()))
        head = normalize_phrase(tail)
        if (
            (len(head) <= HOLD_CHARS and text_width(head) <= HOLD_CHARS)
            or self._prefix_of_a_phrase(head)
            or self._may_say_long_again(head)
        ):
            return tail_start + (len(tail) - len(tail.lstrip()))
        if len(head) > FREE_AFTER:
            # A longer sentence only grows (a counter label in front, dropped once complete,
            # is shorter than the margin), and phrases only change at a sentence's end.
            self._free_tail = tail_start
        return end

    def _ends_run(self, win: TextWindow, segmenter: Segmenter, tail_start: int, end: int) -> bool:
        """Whether what is being written ends the run when it ends, whatever length it
        reaches. Either the unfinished sentence: a unit whose phrase is already longer than any
        phrase (normalising a longer text never gives a shorter phrase: it only trims the ends,
        folds whitespace and drops a counter label, which the first chars settle), and no recent
        long sentence begins like it, so it will be a new long sentence. Or the unfinished line:
        a new structure line already longer than any phrase. Asked only of a run in which no
        phrase came twice: no pool hit fires before the barrier, none after it can reach back,
        and no periodic loop settles into a batch that has not formed, so the run may go out (a
        heading, while the paragraph or the list under it is written)."""
        line_start = segmenter.line_from
        if (
            end - line_start > self._max_chars + 1
            and len(win.slice(line_start, end).strip()) > self._max_chars
            and segmenter.open_structure_is_new(win, end)
        ):
            return True
        if end - tail_start <= self._max_chars:
            return False
        tail = win.slice(tail_start, end)
        if self._may_be_openers(tail_start, tail):
            return False  # openers strung together end as phrases, not as a long sentence
        head = normalize_phrase(tail)
        if len(head) <= self._max_chars or not has_alnum(head):
            return False
        return segmenter.open_sentence_counts(win, end) and not self._may_say_long_again(head)

    def _may_be_openers(self, tail_start: int, tail: str) -> bool:
        """Whether the unfinished sentence from ``tail_start`` may still end as openers
        strung together (``_short_clauses``): a clause ended, every clause ended an opener,
        and the clause being written no wider than the short phrase that may end it. Once
        not, never again, however the sentence goes on; the clauses ended are read once."""
        if self._strung_tail != tail_start:
            self._strung_tail, self._strung_from, self._strung = tail_start, 0, _MAYBE
        if self._strung == _NEVER:
            return False
        last = ""
        for match in _CLAUSE_PIECE.finditer(tail, self._strung_from):
            clause = match.group()
            if not clause:
                break  # (the empty match at the end)
            words = clause.strip()
            if words and words[-1] in CLAUSE_MARKS:  # an ended clause: an opener, or never
                # (a formula is no opener: ``64 is 2^6,`` begins a derivation's sentence)
                if text_width(words) > OPENER_CHARS or not has_alnum(words) or notation(words):
                    self._strung = _NEVER
                    return False
                self._strung, self._strung_from = _STRUNG, match.end()
                last = ""
            else:
                last = words
        wide = text_width(last)
        if self._strung == _MAYBE:
            # no clause ended yet: the first clause is an opener while it may still be one
            if wide > OPENER_CHARS:
                self._strung = _NEVER
            return False
        if wide > HOLD_CHARS:
            self._strung = _NEVER
            return False
        return True

    def _prefix_of_a_phrase(self, head: str) -> bool:
        # a few dozen phrases at most, and only asked of an unfinished sentence of 21-40 chars
        return any(phrase.startswith(head) for phrase in self._counts)


# A clause of a sentence: up to and including a clause mark that no digit follows (``1,000`` is
# one number), and the spaces after it; or the rest of the sentence.
_CLAUSE_PIECE: Final = re.compile(f"(?:[^{CLAUSE_MARKS}]|[,](?=[0-9]))*(?:[{CLAUSE_MARKS}]\\s*|$)")
# An opener is at most this wide (``Actually,``, ``等等，``, ``让我想想，``; a CJK char counted as
# two): a song's clause (``再见了，梧桐树下的操场，``) or a sentence's content is wider.
OPENER_CHARS: Final = 10


# How a short phrase after the openers ends the sentence (``equation 1 is:`` introduces one).
_PHRASE_ENDS: Final = ".!?。！？…"


# Whether an unfinished sentence may end as openers strung together (``_may_be_openers``).
_MAYBE, _STRUNG, _NEVER = 0, 1, 2


def _short_clauses(sentence: str) -> list[tuple[int, str]] | None:
    """The clauses of a sentence made of openers (each with its offset, the spaces after it
    left out): two or more, each an opener (``OPENER_CHARS`` wide at most, with a letter) but
    the last, which after two openers or more may be a short phrase that ends the sentence
    (``HOLD_CHARS`` wide: ``Wait, Wait, 嗯， Let me reconsider.``). None otherwise: a sentence
    with a clause of content (``Wait, that is wrong.``), or a song's line, is one unit, as it
    was written."""
    pieces: list[tuple[int, str]] = []
    for match in _CLAUSE_PIECE.finditer(sentence):
        piece = match.group().rstrip()
        if piece:
            if not any(char.isalnum() for char in piece):
                return None
            pieces.append((match.start(), piece))
    if len(pieces) < 2:
        return None
    for _, piece in pieces[:-1]:
        if text_width(piece) > OPENER_CHARS:
            return None
    last = pieces[-1][1]
    wide = text_width(last)
    if wide > OPENER_CHARS and (
        len(pieces) < 3 or wide > HOLD_CHARS or last[-1] not in _PHRASE_ENDS
    ):
        return None
    return pieces
