"""Rule ``rehash``: sentence after sentence says again what a recent one said, in other words.

What it catches. A model that has run out of things to say goes on saying the last thing:
``Rayleigh scattering is inversely proportional to the fourth power of the wavelength, ...``,
then ``Again, Rayleigh scattering ...``, then ``Put simply, ...`` with ``much`` for ``far``,
inside one paragraph that never ends; or it works a count out again and again, each sentence
said one of a few ways, in an order that shifts (``两针相差240°−110°=130°。``, then
``两针夹角为240°−110°=130°。``). No two copies are the same text, so no periodic rule sees a
period; the copies are sentences, not lines or paragraphs, so neither ``reprise`` nor ``drift``
sees them.

Why that is a loop. Each sentence says what one of the last ones said, word for word or with a
word or two changed, and brings no word the text had not said: nothing new comes.

What counts. A *unit* is a sentence of prose as the segmenter hands it on (never code, a fence,
or in the visible text a list item, table row or quote) at least ``MIN_WIDTH`` wide (a CJK char
counted as two) with at least ``MIN_TOKENS`` tokens (a word, a number or a CJK char each). A
connector that opens it (``In other words,``, ``总之，``: at most four words or six CJK chars,
``CONNECTOR_WEIGHT``, before a comma or colon) is left out of its words; one before a colon is
its label (``Thursday:``). A unit is a *copy* of an earlier one when it says the same words (one
of the last ``SAID``) or is a near copy of one of the last ``LOOK_BACK``: at most one token edit
in ``EDITS_PER`` apart, or one edit for a unit of ``SHORT_NEAR`` tokens or more (the longer one
may go on with a clause of its own; a unit of fewer tokens has copies word for word only). A
copy says the same numbers (``text.numbers_said``: ``Four paper boats`` after ``Five`` is a
counting song's next verse) and the same one-letter names (a formula restated with ``d`` for
``c`` is a derivation's next step), and one under a label not said before is an item of a list
(a week's plan with the same routine every day). A copy is *stale* when it says words said
before (one of the last ``SAID``), or, when it has ``EDITS_PER`` tokens or more, brings no word
the last ``LOOK_BACK`` did not say; and it brings no new word in the slot of the connector it
copies (``On FreeBSD,`` after ``On Linux,`` names a new item).

When it fires. Either
* one sentence said again: ``SAID_AGAIN`` copies in a row, each of the one before, one of them
  stale and one not the same text (copies that are all the same text are the periodic
  rules'): ``far`` for ``much`` is new the first time, ``much`` again is not;
* or a passage drawn back in a new order: of the last ``WINDOW`` units ``STALE_UNITS`` stale,
  from ``MIN_SOURCES`` units or more that differ in their words (a log's readings differ in
  their numbers alone), one stale unit in ``MOVED_PER`` or more after another unit than last
  time. A block said again in its own order (a chorus sung to end a song) is the periodic
  rules' and ``drift``'s to judge.
A sentence restated once, a summary, a refrain between verses, a derivation that goes back to a
formula line or two, parallel cases whose numbers or names change: none fill a window or a run.

Where it cuts. At the first copy of one sentence: the sentence is kept once. For a passage,
where its run of copies began: going back from the hit, the run ends before ``NEW_GAP`` units
of which ``GAP_NEW`` copy nothing, and begins at a copy.

What it holds back: nothing (no watermark). A real trace restates its last line now and then;
held, it would stall. What the other rules' watermark let out past the cut is the hit's
lead-in (the channel counts it).

How it stays incremental. A unit is read into tokens once, when it ends. It is looked up by its
words in a dict and compared with the last ``LOOK_BACK`` units, each by its length and its
first or last two tokens (a copy one edit in ten apart keeps them), then by its numbers and its
token set (read when a comparison first asks), before a banded edit distance. The labels of
the last ``SAID`` units are counted as units come and go; the words of the last ``LOOK_BACK``
are gathered when a copy asks (most units copy nothing), and the cut is looked for once, when
the rule fires. Memory is bounded by these counts.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from typing import Final

from looprescue.detect import tally
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.nearcopy import edit_distance_up_to
from looprescue.detect.rule import CLAUSES, Rule
from looprescue.detect.shape import text_width
from looprescue.detect.text import TOKEN, excerpt, number_set

_FEEDS: Final = frozenset({CLAUSES})

# A unit is at least this wide and has at least this many tokens: a sentence that says
# something. Shorter ones (``Let me check.``, ``好的。``) come back in any text; a pool is made
# of them.
MIN_WIDTH: Final = 24
MIN_TOKENS: Final = 6
# A connector before a comma or colon opens a copy: at most four words or six CJK chars (a
# word weighs three, a CJK char two); the marks that may close it, the chars it may take.
CONNECTOR_WEIGHT: Final = 12
_CONNECTOR_END: Final = re.compile(r"[,，:：]")
CONNECTOR_CHARS: Final = 24
# A near copy is at most one token edit in this many apart.
EDITS_PER: Final = 10
# A unit of fewer tokens than EDITS_PER but at least this many is a near copy at one edit
# (``Wait, let me recheck that 7 × 143 is 1001.`` after ``... gives 1001.``), yet counts as
# stale only when said word for word before: a list of combinations says only words said
# before, each line one edit from the last (``the alpha part follows bravo``, then ``... follows
# charlie``), but never a line twice. Fewer tokens: copies word for word only.
SHORT_NEAR: Final = 7
# Near copies, and the words a copy may not bring anew, are looked for among this many units
# before; what is said again word for word, and the labels said, among this many.
LOOK_BACK: Final = 24
SAID: Final = 200
# One sentence said again: this many copies in a row.
SAID_AGAIN: Final = 3
# A passage drawn back: of the last WINDOW units STALE_UNITS stale, from MIN_SOURCES units or
# more, one in MOVED_PER of them after another unit than last time.
WINDOW: Final = 12
STALE_UNITS: Final = 11
MIN_SOURCES: Final = 3
MOVED_PER: Final = 5
# Going back from a passage's hit, GAP_NEW units that copy nothing within NEW_GAP end its run.
NEW_GAP: Final = 4
GAP_NEW: Final = 3

_CJK: Final = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
# one-letter names (``a`` and ``i`` are words too often to be told from them)
_NAMES: Final = frozenset("bcdefghjklmnopqrstuvwxyz")


class _Unit:
    """A counted unit: what it says, and what it was found to be. Its token set and its
    numbers are read when a comparison first asks (most units are compared with none)."""

    __slots__ = (
        "_kinds", "_numbers", "body", "copied", "head", "label", "source", "start", "text",
        "tokens",
    )  # fmt: skip

    def __init__(self, text: str, read: tuple[list[str], list[str], str], start: int) -> None:
        tokens, head, label = read
        self.text = text  # as written (stripped)
        self.head = head
        self.label = label
        self.copied = False  # whether it copies a unit before it
        self.tokens = tokens
        self.body = " ".join(tokens)  # what it says, word for word
        self.start = start
        self.source = 0  # the first unit of the ones it copies (its own count when new)
        self._kinds: frozenset[str] | None = None
        self._numbers: frozenset[str] | None = None

    def token_set(self) -> frozenset[str]:
        kinds = self._kinds
        if kinds is None:
            kinds = self._kinds = frozenset(self.tokens)
        return kinds

    def numbers(self) -> frozenset[str]:
        """The numbers it says, its connector's too (``Try x = 8:`` is a counted template's
        label, no connector)."""
        numbers = self._numbers
        if numbers is None:
            kinds = self.token_set()
            numbers = self._numbers = number_set(self.text, kinds.union(self.head))
        return numbers

    def folded(self) -> str:
        """Its text with whitespace runs as one space."""
        return " ".join(self.text.split())

    def words(self) -> str:
        """What it says in words: its numbers left out (a log's readings differ in them)."""
        return " ".join(token for token in self.tokens if not token[0].isdigit())


def _read(sentence: str) -> tuple[list[str], list[str], str]:
    """A unit's tokens (lower case, its connector left out), its connector's tokens, and its
    label (a connector that ends with a colon: ``Thursday:``)."""
    lowered = sentence.lower()
    body_from, head, label = 0, [], ""
    mark = _CONNECTOR_END.search(lowered, 0, CONNECTOR_CHARS)
    if mark is not None:
        head = TOKEN.findall(lowered, 0, mark.start())
        # (a word weighs three, a CJK char two: ``In other words``, ``再强调一次``)
        if sum(2 if _CJK.match(token) else 3 for token in head) <= CONNECTOR_WEIGHT:
            body_from = mark.end()
            if mark.group() in ":：":
                label = " ".join(head)
        else:
            head = []
    return TOKEN.findall(lowered, body_from), head, label


def _copies(a: _Unit, b: _Unit) -> bool:
    """Whether ``a`` and ``b`` say the same: the same numbers, and the shorter at most one
    token edit in EDITS_PER from the longer or from its head (the longer may add a clause)."""
    short, long = (a, b) if len(a.tokens) <= len(b.tokens) else (b, a)
    n = len(short.tokens)
    bound = max(1, n // EDITS_PER) if n >= SHORT_NEAR else 0
    s, t = short.tokens, long.tokens
    added = len(t) - n > bound  # (the longer adds a clause: its head is the copy)
    # (the cheap looks first: a copy so near keeps its first two tokens, or its last two when
    # the same length; most units begin and end like no other)
    if not bound or (added and len(t) > 2 * n):
        return False
    if (s[0] != t[0] or s[1] != t[1]) and (added or s[-1] != t[-1] or s[-2] != t[-2]):
        return False
    if a.numbers() != b.numbers():
        return False
    if len(short.token_set() - long.token_set()) > bound:
        return False  # (each token the longer lacks costs an edit)
    near = edit_distance_up_to(s, t[:n] if added else t, bound) <= bound
    return near and not _names_differ(s, t)


def _names_differ(a: list[str], b: list[str]) -> bool:
    """Whether ``a`` and ``b`` (tokens in lower case) say a one-letter name (``c``, ``x``,
    ``B``) a different number of times: a formula restated with ``d`` for ``c`` is its next
    step, ``Option B`` another option."""
    names = Counter(token for token in a if token in _NAMES)
    names.subtract(token for token in b if token in _NAMES)
    return any(names.values())


class RehashRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("rehash",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._count = 0  # units so far
        self._recent: deque[_Unit] = deque()  # the last LOOK_BACK units
        # how many of them open with each pair of tokens, and end with each: a near copy
        # shares one of the two with the unit it copies (``_copies``), so a unit that shares
        # neither with any is compared with none of them
        self._heads: dict[tuple[str, str], int] = {}
        self._tails: dict[tuple[str, str], int] = {}
        self._said: deque[_Unit] = deque()  # the last SAID units
        self._by_body: dict[str, _Unit] = {}  # the last of them to say each body
        # the words the last LOOK_BACK units said (None: to be read again), for whether a copy
        # brings a new one
        self._vocabulary: set[str] | None = None
        self._after: dict[int, int] = {}  # a source's unit: the source of the unit before it
        self._first: dict[int, int] = {}  # a source's start
        self._last_source = -1  # the source of the unit before
        self._last_new = True  # whether the unit before copied nothing
        # the current run of copies of one unit, each after the one before it
        self._run = 0
        self._run_stale = 0
        self._run_changed = False  # one of the run not the same text
        self._run_start = 0
        # the last WINDOW units: whether stale, whether moved, the unit
        self._window: deque[tuple[bool, bool, _Unit]] = deque()
        self._window_stale = 0
        self._window_moved = 0
        self._labels: dict[str, int] = {}  # labels the last SAID units said, how many each

    def on_clauses(self, sentence: str, start: int, end: int) -> Hit | None:
        # (the cheap looks first: most sentences are plain ASCII)
        if sentence.isascii():
            if len(sentence) < MIN_WIDTH or sentence.count(" ") < MIN_TOKENS - 1:
                return None  # (too few words)
        elif len(sentence) < MIN_WIDTH // 2 or text_width(sentence) < MIN_WIDTH:
            return None
        read = _read(sentence)
        if len(read[0]) < MIN_TOKENS:
            return None
        unit = _Unit(sentence, read, start)
        self._count += 1
        unit.source = self._count
        labels = self._labels
        if unit.label and unit.label not in labels:
            # a new label names a new item (``Thursday:`` over the same plan as Monday's)
            copied = said = None
        else:
            said = self._by_body.get(unit.body)
            if said is not None and said.numbers() != unit.numbers():
                said = None  # (the numbers of a connector differ: a counted template's)
            copied = said
            if copied is None and len(unit.tokens) >= SHORT_NEAR and self._may_copy(unit):
                # (a unit of fewer tokens has no near copies)
                for before in reversed(self._recent):
                    if _copies(before, unit):
                        copied = before
                        break
        stale = said is not None
        if copied is not None:
            unit.source = copied.source
            unit.copied = True
            # nothing new: no word of its own, nor of a connector that fills the slot of the
            # one it copies (``On FreeBSD,`` after ``On Linux,`` names a new item; ``Put
            # simply,`` after ``That is,`` is another way to say it again)
            vocabulary = self._said_words()
            if not stale and len(unit.tokens) >= EDITS_PER:  # (see SHORT_NEAR)
                stale = all(token in vocabulary for token in unit.tokens)
            if stale and unit.head and not set(unit.head).isdisjoint(copied.head):
                stale = all(token in vocabulary for token in unit.head)
        else:
            self._first[unit.source] = start
        same = said is not None and said.folded() == unit.folded()
        self._remember(unit)
        return self._judge(unit, copied, stale, same, end)

    def _judge(
        self, unit: _Unit, copied: _Unit | None, stale: bool, same: bool, end: int
    ) -> Hit | None:
        source, last = unit.source, self._last_source
        moved = stale and not self._last_new and self._after.get(source, -1) != last
        if copied is not None and source == last:
            if self._run == 0:
                self._run_start = unit.start
            self._run += 1
            self._run_stale += stale
            self._run_changed = self._run_changed or not same
        else:
            self._run = self._run_stale = 0
            self._run_changed = False
        self._after[source] = last
        self._last_source, self._last_new = source, copied is None
        self._enter(stale, moved, unit)
        if self._run >= SAID_AGAIN and self._run_stale and self._run_changed:
            return self._hit(self._run_start, unit, self._run + 1, end)
        window = self._window
        if (
            len(window) < WINDOW
            or self._window_stale < STALE_UNITS
            or MOVED_PER * self._window_moved < self._window_stale
        ):
            return None
        stale_units = [said for was_stale, _, said in window if was_stale]
        if len({said.source for said in stale_units}) < MIN_SOURCES:
            return None
        if len({said.words() for said in stale_units}) < MIN_SOURCES:
            return None  # (a log's readings: lines that differ in their numbers)
        return self._hit(self._run_began(), unit, self._window_stale, end)

    def _hit(self, cut: int, unit: _Unit, repeats: int, end: int) -> Hit:
        first = self._first.get(unit.source, cut)
        return Hit(
            rule="rehash",
            channel=self._channel,
            prune_offset=cut,
            loop_start=min(first, cut),
            fired_at=end,
            repeats=float(repeats),
            period=None,
            evidence=excerpt(unit.folded()),
            # (nothing was held: the channel counts what went out past the cut as lead-in)
        )

    def _run_began(self) -> int:
        """Where the run of copies that ends with the last unit began: going back, the run
        ends before NEW_GAP units of which GAP_NEW copy nothing; it begins at a copy."""
        began = -1
        new_in_gap = 0
        gap: deque[bool] = deque()
        said = self._said
        for i in range(len(said) - 1, -1, -1):
            new = not said[i].copied
            gap.append(new)
            new_in_gap += new
            if len(gap) > NEW_GAP:
                new_in_gap -= gap.popleft()
            if new_in_gap >= GAP_NEW:
                break
            if not new:
                began = i
        return said[began].start if began >= 0 else said[-1].start

    def _enter(self, stale: bool, moved: bool, unit: _Unit) -> None:
        window = self._window
        window.append((stale, moved, unit))
        self._window_stale += stale
        self._window_moved += moved
        if len(window) > WINDOW:
            gone_stale, gone_moved, _ = window.popleft()
            self._window_stale -= gone_stale
            self._window_moved -= gone_moved

    def _said_words(self) -> set[str]:
        """The words of the last LOOK_BACK units and their connectors (read when a copy asks,
        and kept until the next unit: most units copy nothing)."""
        words = self._vocabulary
        if words is None:
            words = set()
            for unit in self._recent:
                words.update(unit.tokens)
                words.update(unit.head)
            self._vocabulary = words
        return words

    def _may_copy(self, unit: _Unit) -> bool:
        """Whether a recent unit opens or ends with the tokens ``unit`` does."""
        tokens = unit.tokens
        return (tokens[0], tokens[1]) in self._heads or (tokens[-2], tokens[-1]) in self._tails

    def _remember(self, unit: _Unit) -> None:
        """Keep a unit among the recent ones and the said ones, and forget the oldest."""
        recent = self._recent
        recent.append(unit)
        tally.add(self._heads, (unit.tokens[0], unit.tokens[1]))
        tally.add(self._tails, (unit.tokens[-2], unit.tokens[-1]))
        if len(recent) > LOOK_BACK:
            old = recent.popleft()
            tally.drop(self._heads, (old.tokens[0], old.tokens[1]))
            tally.drop(self._tails, (old.tokens[-2], old.tokens[-1]))
        self._vocabulary = None
        self._by_body[unit.body] = unit
        if unit.label:
            tally.add(self._labels, unit.label)
        said = self._said
        said.append(unit)
        if len(said) > SAID:
            gone = said.popleft()
            if self._by_body.get(gone.body) is gone:
                del self._by_body[gone.body]
            if gone.label:
                tally.drop(self._labels, gone.label)
            if len(self._after) > 2 * SAID:
                self._forget_sources(said[0].source)

    def _forget_sources(self, oldest: int) -> None:
        """Drop what is kept of sources no unit said since copies (asked when twice as many
        are kept, so it costs O(1) a unit)."""
        live = {unit.source for unit in self._said}
        self._after = {src: after for src, after in self._after.items() if src in live}
        self._first = {src: at for src, at in self._first.items() if src in live or src >= oldest}
