"""How much of a recurring suffix the periodic rules could still cut: the periodic watermark.

The periodic host (``rules/periodic.py``) finds the longest suffix of the folded text (every
number folded to one char) that recurs one period earlier. A second copy looks exactly like
that suffix while it is written, so holding all of it back is right while a loop could still
fire on it. But the two periodic rules cut different things:

* ``cycle`` cuts copies that are the same raw text, numbers and all. Of a run whose copies
  differ in their numbers it can only ever cut the suffix that recurs exactly.
* ``counter`` cuts copies that differ in a few numbers. It never fires in a fence, on code or
  data (no counter shape), or across two copies that changed more numbers on a line than it
  allows (``counterMaxChangingNumbers``; one for a table row): its loop begins after them.

So a log, a CSV or a table whose lines change many numbers each, or any such run in a fence,
was held back from its first line to its last, seconds at a time. ``SuffixHold`` narrows the
hold to what a rule could still cut: the exact suffix when no counter can fire on the run,
else the folded suffix from the latest line that changed too many numbers on.

What it reads is judged once per line: at the latest line break inside the suffix, the copy
that ends there (one period of raw text) gives the unit's counter shape and whether it is
fenced, and that line and the one a period before it give the numbers that changed. A line a
call skipped is never judged; the hold is then only wider, never narrower.
"""

from __future__ import annotations

from collections.abc import Callable

from looprescue.config import DetectorConfig
from looprescue.detect.buffer import TextWindow
from looprescue.detect.copies import NumbersByLine, UnitFacts
from looprescue.detect.period import run_length
from looprescue.detect.rules.counter import changes_allowed
from looprescue.detect.segment import Segmenter


class SuffixHold:
    """Narrows the periodic watermark to what ``cycle`` or ``counter`` could still cut."""

    def __init__(self, cfg: DetectorConfig, numbers: NumbersByLine) -> None:
        self._cfg = cfg
        self._numbers = numbers  # the periodic rule's numbers by line, shared with its judge
        self._lag = 0  # the folded lag the state below belongs to
        self._checked = 0  # raw offset just past the latest line break judged
        self._counter = True  # whether a counter could fire on the run
        self._floor = -1  # folded offset: a counter's copies begin here at the earliest
        # the exact (raw) suffix at the last call: its lag, its length, where it ended
        self._raw_lag = 0
        self._raw_len = 0
        self._raw_end = 0
        # the raw offset returned last: what was let go stays let go (the folded suffix's own
        # start never moves back either)
        self.returned = 0

    def held_from(
        self,
        win: TextWindow,
        segmenter: Segmenter,
        good: int,
        lag: int,
        facts_of: Callable[[str], UnitFacts],
    ) -> int:
        """Raw offset from which the suffix of ``good`` folded chars, recurring at folded
        ``lag``, must be held back. ``facts_of`` is the periodic rule's reading of one copy's
        shape (passed per call: kept here, the rule and this would hold each other)."""
        held = max(self._narrowed(win, segmenter, good, lag, facts_of), self.returned)
        self.returned = held
        return held

    def _narrowed(
        self,
        win: TextWindow,
        segmenter: Segmenter,
        good: int,
        lag: int,
        facts_of: Callable[[str], UnitFacts],
    ) -> int:
        start = win.fend - good  # folded start of the suffix: where its second copy begins
        folded_from = win.raw_of(start)
        if start - lag < win.fbase:
            return folded_from  # the run's first copy is no longer held: nothing to judge by
        if lag != self._lag:
            self._lag, self._checked, self._counter, self._floor = lag, 0, True, -1
        run_from = win.raw_of(start - lag)  # the run's first copy begins a period earlier
        # Every copy but the first is code when a fence is open from the second copy on and
        # that copy has come whole, with the lines after it (a copy with a fence line in it
        # would have closed it), or, before that, from the first copy on: a counter, judged by
        # its latest copy, never fires in a fence.
        if segmenter.fence_open_since(folded_from if good >= 2 * lag else run_from):
            return self._exact_from(win, lag, folded_from)
        if good < lag:
            return folded_from  # no whole copy recurs yet: its shape is not known
        self._judge_latest_line(win, start, lag, run_from, facts_of)
        if not self._counter:
            return self._exact_from(win, lag, folded_from)
        if self._floor > start:
            return min(self._exact_from(win, lag, folded_from), win.raw_of(self._floor))
        return folded_from

    def _judge_latest_line(
        self,
        win: TextWindow,
        start: int,
        lag: int,
        run_from: int,
        facts_of: Callable[[str], UnitFacts],
    ) -> None:
        """Judge the copy that ends at the latest line break not judged yet: its counter shape,
        and the numbers its last line changed against the line a period before it."""
        raw, base = win.raw, win.base
        brk = raw.rfind("\n", max(self._checked, run_from) - base, win.synced - base)
        if brk < 0:
            return
        line_end = base + brk + 1
        self._checked = line_end
        copy_from = win.folded_of(line_end) - lag
        if copy_from < start - lag:
            return  # the copy ending here began before the run did
        copy_raw = win.raw_of(copy_from)
        shape = facts_of(win.slice(copy_raw, line_end)).counter_shape
        self._counter = shape is not None
        if shape is None or copy_from < start:
            return  # no counter, or no copy before this one to compare its numbers with
        # the line that ended: from the break before it, within the copy
        line_from = max(copy_raw, base + raw.rfind("\n", max(0, copy_raw - base - 1), brk) + 1)
        earlier = win.raw_of(win.folded_of(line_from) - lag)
        changed = self._numbers.changes(win, (line_from, line_end), (earlier, copy_raw))
        if changed > changes_allowed(self._cfg, shape):
            self._floor = max(self._floor, win.folded_of(line_from))

    def _exact_from(self, win: TextWindow, lag: int, folded_from: int) -> int:
        """Raw offset where the suffix that recurs exactly, a copy's raw length earlier, begins
        (no earlier than ``folded_from``)."""
        base, stop = win.base, win.synced
        # A copy's raw length, read where the text is not inside a number: a number still
        # being written has no settled place in the folded text yet.
        at = stop
        while at > base and "0" <= win.raw[at - base - 1] <= "9":
            at -= 1
        raw_lag = at - win.raw_of(win.folded_of(at) - lag)
        floor = folded_from - raw_lag - base
        if floor < 0 or raw_lag <= 0:
            return folded_from
        known = 0
        if raw_lag == self._raw_lag and self._raw_end <= stop:
            at = self._raw_end - base
            if win.raw[at : stop - base] == win.raw[at - raw_lag : stop - base - raw_lag]:
                known = self._raw_len + stop - self._raw_end
        most = stop - base - raw_lag - floor
        length = run_length(win.raw, stop - base, raw_lag, min(known, most), floor)
        self._raw_lag, self._raw_len, self._raw_end = raw_lag, length, stop
        return stop - length
