"""The period search: where the folded text repeats itself, and how far back a repetition holds.

Pure string work on the folded text (``buffer.py``), shared by the periodic rules (which track
runs at checkpoints and hold back a suffix that recurs) and by the rules that ask for a hit for
a repetition they confirmed (``paragraph``). Nothing here judges whether a repetition is a loop:
that is the unit's shape (``copies.py``) and the rules (``rules/cycle.py``,
``rules/counter.py``).

Every search is bounded: a run is followed back with a galloping search (a long run costs
O(L log L) once), a new period is looked for by ``str.rfind`` of a short probe (done in C).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# Length of the folded suffix searched for in the window: long enough that a chance match in
# prose is rare; shorter loops are found through a multiple of their period.
PROBE: Final = 24
# The watermark's suffix search indexes the text (``recurrence.py``) once the range it searches
# is this long: below it, ``str.rfind`` over the range costs less than indexing the new chars
# (the index spends about 600 instructions per char when compiled, a failing ``rfind`` about 5
# per char of the range).
INDEX_FROM: Final = 1024
# Smallest lag searched for; the primitive period found inside a run may be shorter.
MIN_LAG: Final = 16
# A recurring suffix at least this long (and two copies) that stops recurring is held until
# the next checkpoint has judged the run it ended.
BROKEN_RUN_MIN: Final = 16
# Lags tracked at once; more than a handful only happens in highly regular text (tables), where
# the longest runs are the interesting ones.
MAX_CANDIDATES: Final = 8
# Runs of a short unit that start and stop between two checkpoints: probed every INNER_STEP
# chars with INNER_PROBE chars, at lags up to INNER_MAX_LAG (the short units: a unit under 16
# chars repeated ten times or more is 20-160 chars, and fits inside a stride). INNER_OVERLAP
# reaches back into the last stride for a run the checkpoint cut in two.
INNER_PROBE: Final = 8
INNER_STEP: Final = 24
INNER_MAX_LAG: Final = 16
INNER_OVERLAP: Final = 24
# Older occurrences of the probe tried per checkpoint, to get past repeats inside one unit.
MAX_OCCURRENCES: Final = 8


@dataclass(slots=True)
class Run:
    lag: int
    start: int  # first folded position whose char equals the one `lag` earlier, up to now
    unit: int  # primitive period of the run (a divisor of lag)


def first_mismatch(a: str, b: str) -> int:
    """Index of the first position where equal-length ``a`` and ``b`` differ (they do)."""
    lo, hi = 0, len(a)  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def last_mismatch(a: str, b: str) -> int:
    """Index of the last position where equal-length ``a`` and ``b`` differ (-1 if none)."""
    for i in range(len(a) - 1, -1, -1):
        if a[i] != b[i]:
            return i
    return -1


def run_length(text: str, end: int, lag: int, known: int, floor: int) -> int:
    """Longest L >= known with text[end-L:end] == text[end-L-lag:end-lag], looking no further
    back than ``floor`` (galloping search, so a long run costs O(L log L) once)."""
    limit = end - lag - floor
    lo = min(known, limit)
    hi = lo
    step = max(lo, PROBE)
    while True:
        trial = min(hi + step, limit)
        if trial <= hi or text[end - trial : end] != text[end - trial - lag : end - lag]:
            break
        hi = trial
        step *= 2
    lo = hi
    hi = min(hi + step, limit + 1)
    # invariant: lo matches, hi does not (or is past the limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if text[end - mid : end] == text[end - mid - lag : end - lag]:
            lo = mid
        else:
            hi = mid
    return lo


def grown(text: str, at: int, end: int, lag: int) -> int:
    """How many chars of ``text[at:end]`` go on matching the text ``lag`` chars earlier."""
    if at - lag < 0 or at >= end:
        return 0
    new, old = text[at:end], text[at - lag : end - lag]
    return len(new) if new == old else first_mismatch(new, old)


def searched_suffix(text: str, e: int, bound: int, max_period: int) -> tuple[int, int]:
    """``PeriodicRule._recurring_suffix`` (``rules/periodic.py``) by ``str.rfind``: lengths
    from short to long, each found at its nearest lag and followed back as far as it matches
    there; the next try is one char longer (a call pays for one search of the whole range:
    the last try, which fails)."""
    good = lag = 0
    length = 1
    stop = e - 1  # a recurrence ends at least one char before the end
    while length <= bound:
        found = text.rfind(text[e - length : e], max(0, e - length - max_period), stop)
        if found < 0:
            break
        lag = e - length - found
        good = tail_match(text, e, lag, length, min(bound, e - lag))
        length = good + 1
        # A longer suffix recurs at no nearer lag (its shorter one would have been found
        # there), and not at this one (the match stopped): it ends further back.
        stop = e - lag - 1
    return good, lag


def tail_match(text: str, end: int, lag: int, known: int, most: int) -> int:
    """Longest L <= ``most`` (>= ``known``, which match) with text[end-L:end] equal to the text
    ``lag`` chars earlier: a few chars one by one (a chance match ends within them), then a
    galloping search."""
    k = known
    stop = min(most, known + 16)
    while k < stop:
        if ord(text[end - k - 1]) != ord(text[end - k - 1 - lag]):  # (compiled: no str made)
            return k
        k += 1
    return k if k >= most else run_length(text, end, lag, k, end - lag - most)


def match_end(text: str, at: int, lag: int, limit: int) -> int:
    """Where the match of ``text[at:]`` with the text ``lag`` chars earlier stops (at most
    ``limit``); ``text[at:at + INNER_PROBE]`` is known to match (galloping, then halving)."""
    good = min(at + INNER_PROBE, limit)
    step = INNER_PROBE
    while good < limit:
        trial = min(good + step, limit)
        if not text.startswith(text[good:trial], good - lag):
            break
        good = trial
        step *= 2
    else:
        return limit
    bad = trial  # text[good:bad] does not match all through
    while bad - good > 1:
        mid = (good + bad) // 2
        if text.startswith(text[good:mid], good - lag):
            good = mid
        else:
            bad = mid
    return good


def primitive_period(stretch: str, lag: int) -> int:
    """The primitive period of a ``lag``-periodic ``stretch``: the smallest rotation period of
    one copy (a divisor of ``lag``), found by one substring search."""
    unit = stretch[:lag]
    return (unit + unit).find(unit, 1)
