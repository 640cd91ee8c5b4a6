"""Rule ``counted``: a template written again and again with only a counting number changed,
far past any count the request names.

What it catches. Copies equal char for char but for one number that counts up by one:
``elif n == 14: return 14`` then ``elif n == 15: return 15`` inside a Fibonacci function, or
``{"id": 212, "name": "user"}`` on and on. A copy may say its counter again in words
(``elif n == 21: return "twenty-one"``, ``第二十一项``): a number from 1 to 99 spelled in
English or Chinese is masked as the counter is when it equals it. A small model that falls
into such a template writes it until the token budget runs out.

Why that is a loop. Nothing in the copies is new but the counter, and the request never asked
for so many: the run goes past :data:`~looprescue.config.DetectorConfig.countedMaxItems`
items and past every number the request names (``largest_count``: "count to 100", "fifty
rows" raise the bound to 100 and 50).

A copy may stray and come back: a model that counts on with its template writes a variant
now and then (``第20条：待定`` among ``第N条：待补充``, ``"unknown"`` among ``"Unknown"``). Up to
``MAX_STRAY`` copies in a row that differ from the template count on with it. A template of
``DRIFT_WIDTH`` or more that changes one char for good goes on as it is now.

A long template (copies ``LONG_TEMPLATE`` wide or more over ``LONG_LINES`` lines: a function
defined again as ``validate_email_2``, ``validate_email_3``, its body the same; a section said
again under ``## 5. Summary``, ``## 6. Summary``) is bounded by the count the request names
alone, at least one: nobody writes a function's body again and again unasked, while a short
one (``{"id": 7}``) is how a list of data is written. A copy of a long template whose lines
it keeps make ``NEAR_WIDTH`` of its width, or of the copy's before it (its lead-in reworded),
is one more copy; one that does not is another block (a workout plan's pull day after its
push day), so a long template has no strays.

What is not a loop. A list whose items change in anything but the counter (``1. Alabama``,
``2. Alaska``; a log line whose measurement changes): more than ``MAX_STRAY`` differing copies
in a row start the count again. A list that stays within the bound. Any text judged without
a request (``scan_text`` with none; ``scan`` of a DSH session reads the human's messages
before the answer as its request): the rule then has no bound to go by and stays off, so the
detector is told ``asked_up_to=None`` there.

Where it cuts. Where the first item past the bound begins (its line when the template spans
lines, or its number in a one-line list), once a fifth of the bound more (at least 5) have
followed (``LONG_OVER`` more of a long template): the items within the bound stay, as
``overrun`` keeps what was asked. In the answer the engine then finishes there: a
continuation would only count on. In the reasoning the answer is still to come, and the
engine resumes.

What it holds back: from the first item past the bound while the run may go on, and, for a
long template's first copy past its bound, while that copy says what the template says. A
near-copy goes out as soon as it differs; found to be one later, it is the hit's lead-in (the
channel counts what went out past the cut).

How it stays incremental. Each number is looked at once. A chain waits for the next value
(one more than its last) within ``ITEM_GAP`` chars (``LONG_GAP`` for a long template, and for
a number alone, which may begin one), and keeps only the text between its last two members
(numbers equal to the counter masked): the template's one copy, and the latest.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Final

from looprescue.detect.asked import zh_number
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.nearcopy import edit_distance_up_to
from looprescue.detect.rule import CHECKPOINT, WATERMARK, Rule
from looprescue.detect.rules.overrun import (
    ITEM_GAP,
    MAX_DIGITS,
    item_start,
    next_item_start,
    overrun_items,
)
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import text_width

_FEEDS: Final = frozenset({CHECKPOINT, WATERMARK})
_NUMBER: Final = re.compile(r"\d+")
# A number from 1 to 99 spelled out: in English words (``fourteen``, ``twenty-one``) or in
# Chinese ones (``十四``, ``二十一``). A copy that says its counter in words counts as one that
# says it in digits.
_EN_UNITS: Final = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_EN_TEENS: Final = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)  # fmt: skip
_EN_TENS: Final = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SPELLED: Final = re.compile(
    rf"""(?ix) (?<![a-z]) (?:
        (?P<tens>{"|".join(_EN_TENS)}) (?:[- ](?P<units>{"|".join(_EN_UNITS)}))?
      | (?P<teen>{"|".join(sorted(_EN_TEENS, key=len, reverse=True))})
    ) (?![a-z])
    | (?P<han>[一二两三四五六七八九]?十[一二三四五六七八九]?|[一二两三四五六七八九])"""
)
# the chains kept before stale ones are swept out (each number may start one)
SWEEP_AT: Final = 256
# Copies in a row that may differ from the template while it goes on: a stray variant or two.
MAX_STRAY: Final = 2
# A template this wide may drift a char for good and go on (``"Mantra" - 范风风`` becomes
# ``范风飏``); a narrower one is a word (``1. cat``, ``2. bat``: a list of rhymes).
DRIFT_WIDTH: Final = 12
# A template this wide (``shape.text_width``) over this many lines is a block of code or prose
# (a function's body), not an item of a list: the request's count alone bounds it.
LONG_TEMPLATE: Final = 100
LONG_LINES: Final = 3
# A long template is a loop this many copies past its bound: its sixth copy when nothing was
# asked. (At its fourth, replicas a compose file writes for "a few workers" were cut.)
LONG_OVER: Final = 5
# A long template's copies may be this far apart (a section of a table, bullets and code).
LONG_GAP: Final = 2400
# A copy of a long template that keeps lines making this share of its width is one more copy
# of it: the same block said again with a line reworded or dropped. (API docs and setup steps
# that share their frame and boilerplate keep up to 0.7 of it from one section to the next.)
NEAR_WIDTH: Final = 0.8


@dataclass(slots=True)
class _Chain:
    value: int  # the counter's last value
    seen_to: int  # offset after it
    first: int  # the counter's value where the equal copies began
    template: str | None = None  # the text between two values, the counter masked
    past: int | None = None  # where the first item past the bound begins
    stray: int = 0  # copies in a row since the last one equal to the template
    equal: int = 0  # copies found equal to the template since it was set
    limit: int = 0  # the items the template may run to (set with the template)
    long: bool = False  # whether the template is a long one (``LONG_TEMPLATE``)
    latest: str = ""  # the latest copy's text (a long template's near-copy may copy it)
    # the latest counter: where the number before it ends, and where it begins
    copy_at: tuple[int, int] = (0, 0)

    def items(self) -> int:
        return self.value - self.first + 1


def _masked(text: str, low: int, high: int) -> str:
    """``text`` with every number equal to ``low`` or ``high`` replaced by ``#``: a copy may
    say its counter twice (``elif n == 14: return 14``), the second time in words
    (``elif n == 14: return "fourteen"``, ``第十四条``)."""
    if any(c.isdigit() for c in text):
        text = _NUMBER.sub(lambda m: "#" if int(m.group()) in (low, high) else m.group(), text)
    return _SPELLED.sub(lambda m: "#" if _spelled(m) in (low, high) else m.group(), text)


def _spelled(match: re.Match[str]) -> int:
    """The value of a number ``_SPELLED`` matched (-1: none it reads)."""
    tens, units, teen, han = match.group("tens", "units", "teen", "han")
    if han is not None:
        return zh_number(han)
    if teen is not None:
        return _EN_TEENS.index(teen.lower())
    value = 10 * (_EN_TENS.index(tens.lower()) + 2) if tens is not None else 0
    return value + (_EN_UNITS.index(units.lower()) + 1 if units is not None else 0)


class CountedRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("counted",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, max_items: int | None, asked_up_to: int | None) -> None:
        self.channel = channel
        # off without a request to bound it, or when the config turns it off
        self.limit = 0 if max_items is None or asked_up_to is None else max(max_items, asked_up_to)
        # a long template's bound: what the request asks for, at least one copy
        self.block_limit = 0 if self.limit == 0 else max(1, asked_up_to or 0)
        self._chains: dict[int, _Chain] = {}  # by the value each waits for
        self._sweep_at = SWEEP_AT
        # the fewest numbers any chain needs before the watermark may hold for it (``_room``;
        # may be stale: it only guides a skip); a new chain's at most
        self._fresh = self.block_limit
        self._nearest = self._fresh
        self._scanned = 0  # numbers before this offset are followed

    @property
    def active(self) -> bool:
        return self.limit > 0

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
            if len(self._chains) > self._sweep_at:
                self._sweep(at)
            hit = self._follow(self._chains, win, number.group(), at, end)
            if hit is not None:
                return hit
        return None

    def _sweep(self, at: int) -> None:
        """Drop chains whose next value can no longer come; sweep again only once as many
        have been added (amortized O(1) per number)."""
        live = {v: c for v, c in self._chains.items() if at - c.seen_to <= _gap(c)}
        self._chains = live
        self._nearest = min((self._room(c) for c in live.values()), default=self._fresh)
        self._sweep_at = max(SWEEP_AT, 2 * len(live))

    def _follow(
        self, chains: dict[int, _Chain], win: TextWindow, digits: str, at: int, end: int
    ) -> Hit | None:
        if len(digits) > MAX_DIGITS:
            return None
        value = int(digits)
        chain = chains.get(value)
        if chain is None or at - chain.seen_to > _gap(chain):
            waiting = chains.get(value + 1)
            if (
                waiting is None
                or at - waiting.seen_to > _gap(waiting)
                or (waiting.template is None and at - waiting.seen_to > ITEM_GAP)
            ):
                # (a number alone waits as long as a long template's copy may take, and
                # gives way to the same number said again after an item's gap)
                chains[value + 1] = _Chain(value, end, value)
            return None
        del chains[value]
        before = chain.seen_to  # where the number before it ends
        template = _masked(win.slice(before, at), chain.value, value)
        # the copy before this counter is the template, or, a long one, a near-copy of it or
        # of the copy before it (a section whose lead-in and dropped bullets drift apart)
        matched = template == chain.template or (
            chain.long
            and chain.template is not None
            and (_near_copy(template, chain.template) or _near_copy(template, chain.latest))
        )
        if (
            not matched
            and chain.template is not None
            and not chain.long
            and _drifted(template, chain.template)
        ):
            # one char changed for good (``范风风`` then ``范风飏`` on every copy): the
            # template goes on as it is now
            matched, chain.template = True, template
        chain.latest = template
        if matched:
            chain.stray = 0
            chain.equal += 1
        elif (
            chain.template is not None
            and not chain.long
            and chain.stray < MAX_STRAY
            and not _is_long(template)
        ):
            chain.stray += 1  # a variant: the template may come back after it
        else:
            # the copies differ: the count starts again from the last value
            chain.template, chain.first, chain.past = template, chain.value, None
            chain.stray = chain.equal = 0
            chain.long = _is_long(template)
            chain.limit = self.block_limit if chain.long else self.limit
        chain.value, chain.seen_to = value, end
        previous, chain.copy_at = chain.copy_at, (before, at)
        chains[value + 1] = chain
        items = chain.items()
        room = self._room(chain)
        if room < self._nearest:
            self._nearest = room
        limit = chain.limit
        if chain.past is None and items > limit and matched:
            # The first copy past the bound: the one this counter confirmed when it is past
            # the bound too (a bound of one copy, or one after a stray), else this counter's.
            copy_before, copy_at = previous if items - 1 > limit else (before, at)
            chain.past = _copy_start(win, copy_before, copy_at, template)
        over = LONG_OVER if chain.long else overrun_items(1, limit)
        if chain.past is not None and items - limit >= over:
            return Hit(
                rule="counted",
                channel=self.channel,
                prune_offset=chain.past,
                loop_start=chain.past,
                fired_at=end,
                repeats=float(items - limit),
                period=None,
                evidence=(
                    f"one template counted {chain.first}…{value}, {items} copies; "
                    f"nothing asked for more than {limit}"
                ),
            )
        return None

    def _room(self, chain: _Chain) -> int:
        """Numbers the chain still needs before the watermark may hold for it (``safe_offset``):
        up to its bound; a chain with no template yet may be a long one, held from its first
        copy past the bound."""
        if chain.template is not None:
            return chain.limit - chain.items()
        return self.block_limit + 1 - chain.items()

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Where the first item past the bound begins while the run may go on; once a run
        reached the bound, where its next item could begin; and, past the bound but not yet
        confirmed by a copy equal to the template, where the latest copy begins (a long
        template's second copy while it says what the first said). The numbers not yet
        followed are followed on copies of the chains that they could take that far."""
        start = max(self._scanned, win.base)
        end = win.end
        tail = win.slice(start, end)
        numbers = list(_NUMBER.finditer(tail))
        if self._nearest > len(numbers):
            return end  # no chain can reach its bound in what is not followed yet
        # (a chain moves on only at the number it waits for)
        waited = {int(n.group()) for n in numbers if len(n.group()) <= MAX_DIGITS}
        chains = {
            v: replace(c) for v, c in self._chains.items() if v in waited or self._room(c) <= 0
        }
        for number in numbers:
            if start + number.end() == end:
                break  # it may have more digits
            at = start + number.start()
            self._follow(chains, win, number.group(), at, start + number.end())
        held = end
        for chain in chains.values():
            if end - chain.seen_to > _gap(chain):
                continue  # the run ended
            template = chain.template
            if chain.past is not None:
                held = min(held, chain.past)
            elif template is None:
                continue
            elif chain.items() == chain.limit and chain.equal:
                held = min(held, _next_copy_start(win, chain, end))
            elif chain.items() > chain.limit and (
                chain.equal or _goes_on_as(win, chain, template, end)
            ):
                held = min(held, _copy_start(win, chain.copy_at[0], chain.copy_at[1], template))
        return held


def _copy_start(win: TextWindow, before: int, at: int, template: str) -> int:
    """Where the copy whose counter is at ``at`` begins (``before``: where the counter before
    it ends). A template that spans lines begins its copies at a line's start, however long
    the text before the counter there (``Let me check once more (attempt 41).``)."""
    if "\n" in template:
        return before + win.slice(before, at).rfind("\n") + 1
    return item_start(win, at)


def _gap(chain: _Chain) -> int:
    """How far after its last counter a chain waits for the next: an item's gap, or a long
    template's (a chain with no template yet may be a long one)."""
    return ITEM_GAP if chain.template is not None and not chain.long else LONG_GAP


def _is_long(template: str) -> bool:
    """Whether a template is a block (a function's body, a section), not a list's item."""
    return template.count("\n") >= LONG_LINES and text_width(template) >= LONG_TEMPLATE


def _near_copy(copy: str, template: str) -> bool:
    """Whether a copy of a long template says most of it as it was: lines the two share, their
    spacing folded, make ``NEAR_WIDTH`` of the wider one's width (``shape.text_width``; a
    section said again with its lead-in reworded or a bullet dropped). A line is weighed by its
    width: a guide's sections that end with one snippet share most of their lines, not most of
    their text, when each says a paragraph of its own."""
    ours, theirs = _lines_of(copy), _lines_of(template)
    shared = Counter(ours) & Counter(theirs)
    width = sum(text_width(line) * n for line, n in shared.items())
    wider = max(sum(map(text_width, ours)), sum(map(text_width, theirs)))
    return width >= NEAR_WIDTH * wider


def _lines_of(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.split("\n") if line.strip()]


def _drifted(copy: str, template: str) -> bool:
    """Whether a copy of a short template, ``DRIFT_WIDTH`` wide or more, is one char apart
    from it."""
    if abs(len(copy) - len(template)) > 1 or text_width(template) < DRIFT_WIDTH:
        return False
    return edit_distance_up_to(list(copy), list(template), 1) <= 1


def _goes_on_as(win: TextWindow, chain: _Chain, template: str, end: int) -> bool:
    """Whether the text after the chain's last counter says what the template says, so far
    (or all it says, and more: the next counter may be still being written)."""
    text = _masked(win.slice(chain.seen_to, end), chain.value, chain.value + 1)
    return template.startswith(text) or text.startswith(template)


def _next_copy_start(win: TextWindow, chain: _Chain, end: int) -> int:
    """Where the copy after the chain's last counter could begin in the text up to ``end``."""
    lines = chain.template.count("\n") if chain.template is not None else 0
    if lines:
        # the copy begins after as many line breaks as the template has
        text, at = win.slice(chain.seen_to, end), -1
        while lines and (at := text.find("\n", at + 1)) >= 0:
            lines -= 1
        if not lines:
            return chain.seen_to + at + 1
    return next_item_start(win, chain.seen_to, end)
