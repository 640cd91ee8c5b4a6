"""Rule ``overrun``: a numbered list that counts on past the range the request asked for.

A list the user asked for ("print the numbers from 1 to 50", "ten stubs task_1 to task_10") is
a counter template the other rules must pass: its items differ only in their number. A small
model often does not stop at the end: ``51, 52, …`` to the token budget, ``def task_11`` to
``task_52``. Nothing in the text says that this is wrong, but the request does: every item past
its range is one nobody asked for, and a model that writes a fifth as many again (at least
:data:`OVERRUN_ITEMS`) is counting, not answering. The cut is where the first item past the
range begins, so what was asked for stays; the answer is then complete, and the engine finishes
it instead of resuming (a continuation would only count on).

The numbers are followed as a chain per asked range: it starts at a number equal to the range's
first, and takes each next number (one more than the last) within :data:`ITEM_GAP` chars.
Other numbers in between (``x + 1`` in a stub's body, a nested ``task_2``) are passed over.

Not a loop: a list that stops at the asked end, or goes a few bonus items past it (fewer than a
fifth of the range, or than ``OVERRUN_ITEMS``); a list after the asked one (five tips asked
and given, then a twelve-step routine): once a list reached the asked end and ended (a new
list item opens with the range's first number, or no next number comes within
:data:`ITEM_GAP`), the request got its list, and a later list is another one; a range of
fewer than ``asked.MIN_ASKED_ITEMS`` items (``3-5 examples`` bounds nothing); and any list
when the request asked for no range (the rule is not built).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final

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
# there ("51. ", "def task_", "| "); else at its number ("…, 50, 51, 52")
ITEM_PREFIX: Final = 16
MAX_DIGITS: Final = 6

_NUMBER: Final = re.compile(r"\d+")
_A_DIGIT: Final = re.compile(r"\d")
_WORD: Final = re.compile(r"[^\W_]")  # a letter or digit: no list mark


def overrun_items(first: int, last: int) -> int:
    """Items past ``first``..``last`` that make a run past it a loop."""
    return max(OVERRUN_ITEMS, (last - first + 1) // 5)


@dataclass(slots=True)
class _Chain:
    last: int  # the end of the asked range it counts in
    value: int  # the number the list is at
    seen_to: int  # offset after that number
    past: int | None = None  # where the first item past the range begins


class OverrunRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("overrun",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, asked: tuple[tuple[int, int], ...] = ()) -> None:
        self.channel = channel
        self._asked: dict[int, int] = {}  # first -> last (the longest range from it)
        for first, last in asked:
            self._asked[first] = max(last, self._asked.get(first, last))
        self._chains: dict[int, _Chain] = {}  # one per asked first number
        # asked first numbers whose list was written to the asked end and ended: a later
        # list is another one (a five-tip answer's twelve-step routine)
        self._answered: set[int] = set()
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
        for number in _NUMBER.finditer(win.slice(start, stop)):
            at, end = start + number.start(), start + number.end()
            if end == stop and not final:
                self._scanned = at  # it may have more digits
                break
            hit = self._follow(self._chains, self._answered, win, number.group(), at, end)
            if hit is not None:
                return hit
        return None

    def _follow(
        self,
        chains: dict[int, _Chain],
        answered: set[int],
        win: TextWindow,
        digits: str,
        at: int,
        end: int,
    ) -> Hit | None:
        if len(digits) > MAX_DIGITS:
            return None
        value = int(digits)
        for first, last in self._asked.items():
            if first in answered:
                continue
            chain = chains.get(first)
            if chain is not None and (
                at - chain.seen_to > ITEM_GAP
                or (value == first and value != chain.value + 1 and _opens_item(win, at, end))
            ):
                # the list ended: long ago, or a new list begins (its first item); one that
                # reached the asked end answered the request
                del chains[first]
                if chain.value >= last:
                    answered.add(first)
                    continue
                chain = None
            if chain is None:
                if value == first:
                    chains[first] = _Chain(last, value, end)
                continue
            if value != chain.value + 1:
                continue
            chain.value, chain.seen_to = value, end
            if value == last + 1:
                chain.past = item_start(win, at)
            if chain.past is not None and value - last >= overrun_items(first, last):
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

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Where the first item past an asked range begins, while the list may go on, and,
        once it reached the range's end, where the next item could begin: a fresh line that
        could still be one (``def task_``), a number still being written (``5`` of ``51``).
        The numbers not yet followed are looked at without keeping what they say (the
        checkpoints decide)."""
        chains = {first: replace(chain) for first, chain in self._chains.items()}
        answered = set(self._answered)
        start = max(self._scanned, win.base)
        end = win.end
        tail = win.slice(start, end)
        for number in _NUMBER.finditer(tail):
            if start + number.end() == end:
                break  # it may have more digits (see below)
            at = start + number.start()
            self._follow(chains, answered, win, number.group(), at, start + number.end())
        held = end
        for chain in chains.values():
            if end - chain.seen_to > ITEM_GAP:
                continue  # the list ended
            if chain.past is not None:
                held = min(held, chain.past)
            elif chain.value == chain.last:
                held = min(held, next_item_start(win, chain.seen_to, end))
        return held


def _opens_item(win: TextWindow, at: int, end: int) -> bool:
    """Whether the number at ``at``..``end`` opens a list item: only marks before it on its
    line (``1.``, ``- 1)``, ``### 1.``) and a list mark right after it."""
    line = win.slice(max(win.base, at - ITEM_PREFIX), at)
    head = line[line.rfind("\n") + 1 :]
    if (len(head) == len(line) and at - ITEM_PREFIX > win.base) or _WORD.search(head):
        return False
    # (one char after it: the checkpoint knows that much, whatever the chunking)
    return win.slice(end, end + 1) in (".", ")", "、", "：", ":")


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
