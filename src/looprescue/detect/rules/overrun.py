"""Rule ``overrun``: a numbered list that counts on past the range the request asked for.

A list the user asked for ("print the numbers from 1 to 50", "ten stubs task_1 to task_10") is
a counter template the other rules must pass: its items differ only in their number. A small
model often does not stop at the end: ``51, 52, …`` to the token budget, ``def task_11`` to
``task_52``. Nothing in the text says that this is wrong, but the request does: every item past
its range is one nobody asked for, and a model that writes a fifth as many again (at least
:data:`OVERRUN_ITEMS`) is counting, not answering. The cut is where the first item past the
range begins, so what was asked for stays; the answer is then complete, and the engine finishes
it instead of resuming (a continuation would only count on).

The numbers are followed as chains per asked range: one starts at a number equal to the range's
first, and takes each next number (one more than the last) within :data:`ITEM_GAP` chars, in an
item of the same shape (what precedes the number on its line, and the char after it: the
headings ``## Recipe 2`` and the steps ``2.`` under them are two lists). Other numbers in
between (``x + 1`` in a stub's body, a nested ``task_2``) are passed over. When the range's
first number opens a heading or a bold label, the asked items are sections, and only the
headings count them: the steps in a section are never cut. A list that begins while one of
the range has not reached its end is that item's own (the steps of the first of five
recipes, indented or not) and is never cut either.

In the reasoning a model may draft more items than asked and choose among them: there only
items past the range that say again, word for word, what an item of the list said count, and
the cut falls where their run begins (ten names asked, then ``11. Golden Crust``, ``12. Sweet
Crumbs``, ``13. Golden Crust`` on to 60). A list of numbers alone is never cut there.

A small count (two to four) bounds sections only: "plan a 3-day trip", "三天的行程"
(``asked.asked_sections``). Only headings and bold labels that name a word of the count next
to their number (``## Day 4``, ``### 第4天``) are followed; a plan of three days written on to
``Day 46`` is cut at ``Day 4``. An ordinal's number in Chinese words (``第四天``, ``第十一章``,
up to 99) is followed as its digits would be.

Not a loop: a list that stops at the asked end, or goes a few bonus items past it (fewer than a
fifth of the range, or than ``OVERRUN_ITEMS``); a list after the asked one (five tips asked
and given, then a twelve-step routine): once a list reached the asked end and ended (a list
of its shape starts again at the range's first number, or no next number comes within
:data:`ITEM_GAP`), the request got its list, and a later list is another one; a range of
fewer than ``asked.MIN_ASKED_ITEMS`` items (``3-5 examples`` bounds nothing), and a plain
list or a heading that names no word of a small count (six tips for three, the days of a
three-week plan); and any list when the request asked for no range (the rule is not built).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

from looprescue.detect.asked import zh_number
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CHECKPOINT, WATERMARK, Rule
from looprescue.detect.segment import Segmenter

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})

# consecutive items of one list lie at most this far apart (a stub of a few lines, a table
# row, a paragraph per item)
ITEM_GAP: Final = 600
# a run past the range is a loop once it has this many items, and a fifth of the range's
# length (a model that adds a bonus item or two is not stuck)
OVERRUN_ITEMS: Final = 5
# an item begins at its line's start when only this much (and no digit) precedes its number
# there ("51. ", "def task_", "| ", "    } else if (n == "); else at its number ("…, 50, 51")
ITEM_PREFIX: Final = 32
MAX_DIGITS: Final = 6

# a number in digits, or an ordinal's number in Chinese words (``第四天``, ``第十一章``: up to
# 99, as plans and outlines number their sections)
_NUMBER: Final = re.compile(
    r"\d+|(?<=第)(?:[一二三四五六七八九]?十[一二三四五六七八九]?|[一二三四五六七八九两])"
)


_A_DIGIT: Final = re.compile(r"\d")
# What follows an item's number before its text: ``12. ``, ``12) ``, ``12、``, ``12: ``.
_ITEM_MARKS: Final = ".)、:：]】 \t"
# A number followed by one of these opens a range (``1-12``, ``1~12``, ``1到12``), no item.
_RANGE_MARKS: Final = frozenset("-–—~～到至")


def overrun_items(first: int, last: int) -> int:
    """Items past ``first``..``last`` that make a run past it a loop."""
    return max(OVERRUN_ITEMS, (last - first + 1) // 5)


# A number with more than ITEM_PREFIX chars, or a digit, before it on its line: an item of a
# list written on one line (``…, 50, 51``), whatever comes before it.
INLINE: Final = "…"
# the chains followed per asked range at once (each number equal to its first may start one)
MAX_CHAINS: Final = 16


@dataclass(slots=True)
class _Chain:
    last: int  # the end of the asked range it counts in
    value: int  # the number the list is at
    seen_to: int  # offset after that number
    # its items' shape: what precedes the number on its line (``## Recipe ``, ``def task_``,
    # ``""`` for ``1.``; INLINE) and the char after it
    opener: str
    after: str
    # it began inside an item of an unfinished list of the range (the steps of the first of
    # five recipes): never the asked list
    nested: bool = False
    past: int | None = None  # where the first item past the range begins
    # (in the reasoning) what its items said, and how many items past the range in a row,
    # since ``past``, said again what an item before them said
    bodies: frozenset[str] = frozenset()
    repeats: int = 0

    def heading(self) -> bool:
        """Whether its items are headings or bold labels (``## Recipe 2``, ``**Day 2**``)."""
        return self.opener.lstrip().startswith(("#", "**"))


class OverrunRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("overrun",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(
        self,
        channel: Channel,
        asked: tuple[tuple[int, int], ...] = (),
        sections: tuple[tuple[int, str], ...] = (),
    ) -> None:
        self.channel = channel
        # In the reasoning a model may draft more items than asked and choose among them:
        # only items past the range that say again what the list said are a loop there.
        self._repeats_only = channel != "text"
        self._asked: dict[int, int] = {}  # first -> last (the longest range from it)
        for first, last in asked:
            self._asked[first] = max(last, self._asked.get(first, last))
        # A small count of sections (``asked.asked_sections``): 1 to the count, held only
        # on headings that name one of its words. A range asked from 1 says more.
        self._section_words: frozenset[str] = frozenset()
        if sections and 1 not in self._asked:
            self._asked[1] = max(n for n, _ in sections)
            self._section_words = frozenset(word for _, word in sections)
        # per asked first number, the lists that count from it, one per shape of item (the
        # headings of five recipes and the steps under each are two lists)
        self._chains: dict[int, list[_Chain]] = {}
        # asked first numbers whose list was written to the asked end and ended: a later
        # list is another one (a five-tip answer's twelve-step routine)
        self._answered: set[int] = set()
        # asked first numbers that open a heading (``## Recipe 1``): the asked items are
        # sections, and a plain list in one counts its steps, not them
        self._sectioned: set[int] = set()
        self._scanned = 0  # numbers before this offset are followed

    @property
    def active(self) -> bool:
        """Whether the request asked for a range (the detector asks the rule nothing else)."""
        return bool(self._asked)

    def at_checkpoint(
        self, win: TextWindow, cp: int, final: bool, segmenter: Segmenter
    ) -> Hit | None:
        """Follow the numbers up to ``cp`` (the char at ``cp`` is known unless ``final``): a
        number touching the end of what is known may go on, and waits for the next check."""
        stop = cp if final else cp + 1
        start = max(self._scanned, win.base)
        self._scanned = cp
        base = win.base
        # (read in place: an ordinal's ``第`` before the start is still seen)
        for number in _NUMBER.finditer(win.raw, start - base, stop - base):
            at, end = base + number.start(), base + number.end()
            if end == stop and not final:
                self._scanned = at  # it may have more digits
                break
            hit = self._follow(
                self._chains, self._answered, self._sectioned, win, number.group(), at, end
            )
            if hit is not None:
                return hit
        return None

    def _follow(
        self,
        chains: dict[int, list[_Chain]],
        answered: set[int],
        sectioned: set[int],
        win: TextWindow,
        digits: str,
        at: int,
        end: int,
    ) -> Hit | None:
        if len(digits) > MAX_DIGITS:
            return None
        value = zh_number(digits)
        shape: tuple[str, str] | None = None
        for first, last in self._asked.items():
            if first in answered:
                continue
            group = chains.get(first)
            if group is None and value != first:
                continue  # (most numbers: nothing counts from this range yet)
            if first == 1 and self._section_words:
                # sections asked by a small count: only their headings count (``Day 4``)
                if shape is None:
                    shape = _shape(win, at, end)
                if not self._names_section(win, shape[0], end):
                    continue
            if group is None:
                group = chains[first] = []
            # lists that paused too long ended; one that reached the asked end answered it
            ended = [c for c in group if at - c.seen_to > ITEM_GAP]
            if ended:
                if any(_answers(c, first, sectioned) for c in ended):
                    answered.add(first)
                    del chains[first]
                    continue
                group[:] = [c for c in group if at - c.seen_to <= ITEM_GAP]
            if shape is None:
                shape = _shape(win, at, end)
            opener, after = shape
            chain = _next_in(group, first, value, opener, after)
            if chain is None:
                if value != first:
                    continue
                same = [c for c in group if c.opener == opener and c.after == after]
                if any(_answers(c, first, sectioned) for c in same):
                    # the list starts again: the one that reached the asked end was the
                    # answer, and this is another list
                    answered.add(first)
                    del chains[first]
                    continue
                # inside an item of a list that has not reached the asked end, a list is that
                # item's own (its steps), however it is numbered or indented
                # (a number that opens a range, ``1-12`` in a docstring, is no item)
                nested = any(
                    c.opener != INLINE
                    and not c.nested
                    and c.value <= last
                    and c.after not in _RANGE_MARKS
                    for c in group
                )
                if not nested:
                    for c in same:
                        group.remove(c)  # the list starts again
                group.append(_Chain(last, value, end, opener, after, nested))
                if len(group) > MAX_CHAINS:
                    del group[0]
                if opener.lstrip().startswith(("#", "**")):
                    sectioned.add(first)
                continue
            here = item_start(win, at)
            if self._repeats_only:
                self._said_before(chain, win.slice(chain.seen_to, here), last, here)
            # (a one-line list's first item opens its line, the next ones follow a comma)
            chain.value, chain.seen_to, chain.opener = value, end, opener
            if value == last + 1:
                chain.past, chain.repeats = here, 0
            run = chain.repeats if self._repeats_only else value - last
            if (
                chain.past is not None
                and run >= overrun_items(first, last)
                and not chain.nested
                and (first not in sectioned or chain.heading())
            ):
                return Hit(
                    rule="overrun",
                    channel=self.channel,
                    prune_offset=chain.past,
                    loop_start=chain.past,
                    fired_at=end,
                    repeats=float(value - last),
                    period=None,
                    evidence=f"counted {first}…{value}, asked for {first}…{last}",
                )
        return None

    @staticmethod
    def _said_before(chain: _Chain, text: str, last: int, here: int) -> None:
        """Judge the item the list was at, whose ``text`` ends where the next item begins
        (``here``): one past the range that says what an item before it said goes on the
        run of repeats; a new one ends it, and the next run may begin with the next item."""
        body = " ".join(text.lstrip(_ITEM_MARKS).replace("*", "").split()).casefold()
        if not any(c.isalpha() for c in body):
            body = ""  # no words: a number list's comma says nothing to repeat
        if chain.value > last:
            if body and body in chain.bodies:
                chain.repeats += 1
            else:
                chain.past, chain.repeats = here, 0
        if body:
            chain.bodies = chain.bodies | {body}

    def _names_section(self, win: TextWindow, opener: str, end: int) -> bool:
        """Whether the number ending at ``end`` heads a section of the asked kind: a heading
        or a bold label that names one of the count's words around its number (``## Day 4``,
        ``### 第4天``; not ``## 4. A day in Rome``)."""
        if not opener.lstrip().startswith(("#", "**")):
            return False
        # (what precedes the number, and the one char after it that the checkpoint knows,
        # whatever the chunking: ``Day 4``, ``第4天``)
        heading = (opener + win.slice(end, end + 1)).lower()
        return any(word in heading for word in self._section_words)

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Where the first item past an asked range begins, while the list may go on, and,
        once it reached the range's end, where the next item could begin: a fresh line that
        could still be one (``def task_``), a number still being written (``5`` of ``51``).
        The numbers not yet followed are looked at without keeping what they say (the
        checkpoints decide)."""
        chains = {first: [replace(c) for c in group] for first, group in self._chains.items()}
        answered, sectioned = set(self._answered), set(self._sectioned)
        start = max(self._scanned, win.base)
        end = win.end
        base = win.base
        for number in _NUMBER.finditer(win.raw, start - base, end - base):
            if base + number.end() == end:
                break  # it may have more digits (see below)
            at = base + number.start()
            self._follow(chains, answered, sectioned, win, number.group(), at, base + number.end())
        held = end
        for first, group in chains.items():
            for chain in group:
                if end - chain.seen_to > ITEM_GAP:
                    continue  # the list ended
                if chain.nested or (first in sectioned and not chain.heading()):
                    continue  # the steps of an item or a section: never cut
                if chain.past is not None:
                    held = min(held, chain.past)
                elif chain.value == chain.last:
                    held = min(held, next_item_start(win, chain.seen_to, end))
        return held


def _shape(win: TextWindow, at: int, end: int) -> tuple[str, str]:
    """The shape of the item whose number is at ``at``..``end``: what precedes it on its line
    (INLINE when that is long or holds a digit) and the char after it (the checkpoint knows
    that one, whatever the chunking)."""
    line = win.slice(max(win.base, at - ITEM_PREFIX - 1), at)
    newline = line.rfind("\n")
    opener = line[newline + 1 :]
    if (newline < 0 and len(line) > ITEM_PREFIX) or _A_DIGIT.search(opener):
        opener = INLINE
    return opener, win.slice(end, end + 1)


def _next_in(group: list[_Chain], first: int, value: int, opener: str, after: str) -> _Chain | None:
    """The list in ``group`` whose next item this number is: one more than its last, of its
    shape (a one-line list's first item opens the line, the next ones do not)."""
    for chain in reversed(group):  # (the latest first: a sublist goes on before its item)
        if (
            value == chain.value + 1
            and after == chain.after
            and (
                opener == chain.opener
                or (chain.value == first and (opener == INLINE or _else_of(chain.opener, opener)))
            )
        ):
            return chain
    return None


# What turns a conditional's first branch into the next one: ``elif`` (Python, shell),
# ``elsif`` (Ruby, Perl), ``else if`` and ``} else if`` (C, Java, JavaScript, Go).
_ELSE: Final = frozenset({"el", "els", "else", "}else", "} else"})


def _else_of(first: str, second: str) -> bool:
    """Whether the opener ``second`` is the next branch of a conditional that ``first`` opens
    (``    if m == `` then ``    elif m == ``): a ladder of branches counts its numbers as a
    list does, though its first branch is written differently."""
    condition = first.lstrip()
    if not condition.startswith("if") or not second.endswith(condition):
        return False
    head = second[: len(second) - len(condition)]
    indent = first[: len(first) - len(condition)]
    return head.startswith(indent) and head[len(indent) :].rstrip() in _ELSE


def _answers(chain: _Chain, first: int, sectioned: set[int]) -> bool:
    """Whether ``chain``, now ended, was the list the request asked for, written to its end:
    in an answer of sections, only the sections' headings count them."""
    return (
        chain.value >= chain.last
        and not chain.nested
        and (first not in sectioned or chain.heading())
    )


def next_item_start(win: TextWindow, after: int, end: int) -> int:
    """Where text after ``after`` could already be the next item: the start of the item whose
    number is still being written at the end, or of a short line without digits that its
    number may end."""
    text = win.slice(max(after, win.base), end)
    digits = len(text) - len(text.rstrip("0123456789"))
    # the line's text before them: held from its start while it could be an item's prefix,
    # the same with its number begun as without (the watermark never moves back)
    head = text[: len(text) - digits]
    newline = head.rfind("\n")
    if newline >= 0 and len(head) - newline - 1 <= ITEM_PREFIX:
        line = head[newline + 1 :]
        if not _A_DIGIT.search(line):
            return end - digits - len(line)
    return end - digits


def item_start(win: TextWindow, at: int) -> int:
    """Where the item whose number is at ``at`` begins."""
    line = win.slice(max(win.base, at - ITEM_PREFIX - 1), at)
    newline = line.rfind("\n")
    if newline < 0 and len(line) > ITEM_PREFIX:
        return at  # a long stretch of its line precedes it
    prefix = line[newline + 1 :]
    if _A_DIGIT.search(prefix):
        return at
    return at - len(prefix)
