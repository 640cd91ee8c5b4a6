"""The watermark's n-gram index and the recurring-suffix search built on it, against their
brute-force definitions (every lag compared char by char)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.paths import CORPUS

from looprescue.config import DetectorConfig
from looprescue.corpus import load_corpus, random_deltas
from looprescue.detect.buffer import TextWindow
from looprescue.detect.channel import ChannelDetector
from looprescue.detect.recurrence import SuffixIndex
from looprescue.detect.rules.periodic import PeriodicRule

# few distinct pieces, so that n-grams recur often, at several lags (ties to break); CJK, an
# astral char, and "\u0461", whose code point is that of "a" plus the index's 1024 slots (the
# same hash: a place of it is no place of "a")
texts = st.lists(
    st.sampled_from(
        ["a", "b", "ab", "aab", " ", ". ", "_", "\n", "好。", "😀", "\u0461", "\u0461b"]
    ),
    max_size=200,
).map("".join)
chunk_sizes = st.lists(st.integers(1, 30), min_size=1, max_size=10)


def _pieces(text: str, sizes: list[int]) -> list[str]:
    pieces, pos, i = [], 0, 0
    while pos < len(text):
        pieces.append(text[pos : pos + sizes[i % len(sizes)]])
        pos += len(pieces[-1])
        i += 1
    return pieces


def _earlier_ends(text: str, end: int, n: int, floor: int) -> list[int]:
    """Every earlier end of ``text[end - n:end]`` whose start is at ``floor`` or later,
    nearest first."""
    gram, ends = text[end - n : end], []
    at = end - 1
    while (found := text.rfind(gram, floor, at)) >= 0:
        ends.append(found + n)
        at = found + n - 1
    return ends


@settings(max_examples=200, deadline=None)
@given(
    text=texts,
    sizes=chunk_sizes,
    keep=st.integers(3, 120),
    lag_range=st.integers(1, 80),
    trim_slack=st.integers(1, 40),
)
def test_the_index_leads_to_every_earlier_place_of_the_last_chars(
    text, sizes, keep, lag_range, trim_slack
):
    index = SuffixIndex(lag_range, trim_slack)
    end = 0
    for piece in _pieces(text, sizes):
        end += len(piece)
        base = max(0, end - keep)  # a window that moves on, sometimes past unindexed chars
        index.update(text[base:end], base, end)
        floor = end - lag_range  # the earliest end asked for
        for n in (1, 2, 3):
            if end - n < base:
                continue
            ends = _earlier_ends(text, end, n, max(base, floor - n))
            if ends:  # the latest place of its hash is that recent at least
                assert index.latest(n) >= ends[0], (n, end)
        # the trigram's chain passes every earlier place of it in range, nearest first
        if end - 3 >= base:
            walked, j = [], index.latest(3)
            while j >= max(floor, base + 3):
                walked.append(j)
                j = index.before(j)
            assert walked == sorted(walked, reverse=True)
            ends = _earlier_ends(text, end, 3, max(base, floor - 3))
            assert set(ends) <= set(walked), (end, ends, walked)


def test_a_chain_reaches_as_far_back_as_the_range_after_trimming():
    # one char repeated: its trigram ended at every place before, and the chain is trimmed
    # as often as it can be
    index = SuffixIndex(lag_range=20, trim_slack=1)
    for end in range(1, 300):
        index.update("a" * end, 0, end)
        walked, j = [], index.latest(3)
        while j >= max(3, end - 20):
            walked.append(j)
            j = index.before(j)
        assert walked == list(range(end - 1, max(3, end - 20) - 1, -1))


def _brute_force(folded: str, bound: int, max_period: int) -> tuple[int, int]:
    """Longest suffix (at most ``bound``) that also ends 1..max_period chars earlier, start
    inside the text, and the nearest lag it does at."""
    e = len(folded)
    good = lag = 0
    for lg in range(1, min(max_period, e) + 1):
        length = 0
        while (
            length < bound
            and length < e - lg
            and folded[e - 1 - length] == folded[e - 1 - length - lg]
        ):
            length += 1
        if length > good:
            good, lag = length, lg
    return good, lag


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    sizes=chunk_sizes,
    max_period=st.integers(2, 60),
    bounds=st.lists(st.integers(0, 60), min_size=1, max_size=5),
    indexed=st.booleans(),
)
def test_the_recurring_suffix_is_the_longest_and_nearest(text, sizes, max_period, bounds, indexed):
    rule = PeriodicRule("reasoning", DetectorConfig(cycleMaxPeriod=max_period), False)
    rule._index_from = 0 if indexed else 10**9  # the index, or the search by rfind
    win = TextWindow(keep=50, slack=20)
    for i, piece in enumerate(_pieces(text, sizes)):
        win.pending.append(piece)
        win.sync()
        win.trim(win.end - 50)  # keeps at least 50 chars, sometimes fewer than the period
        folded = win.folded
        for bound in (len(folded) - 1, min(bounds[i % len(bounds)], len(folded) - 1)):
            assert rule._recurring_suffix(win, bound) == _brute_force(folded, bound, max_period)


def _watermarks(text: str, channel: str, indexed: bool) -> list[int | tuple]:
    detector = ChannelDetector(channel, DetectorConfig())
    periodic = detector.rule("cycle")
    assert isinstance(periodic, PeriodicRule)
    periodic._index_from = 0 if indexed else 10**9
    marks: list[int | tuple] = []
    rng = random.Random(5)
    for delta in random_deltas(text, rng):
        hit = detector.feed(delta)
        if hit is not None:
            return [*marks, (hit.rule, hit.prune_offset)]
        marks.append(detector.safe_offset())
    return marks


@pytest.mark.parametrize("record", load_corpus(CORPUS), ids=lambda record: record.id)
def test_the_index_and_the_search_hold_the_same_text_back(record):
    # every record of the dev corpus, loops and long answers alike, after every delta
    text = record.scored_text()
    assert _watermarks(text, record.channel, True) == _watermarks(text, record.channel, False)
