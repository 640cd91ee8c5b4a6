"""detect.tally: counts of the keys a window holds, none left at zero."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from looprescue.detect import tally


@given(st.lists(st.tuples(st.booleans(), st.sampled_from("abcd")), max_size=60))
def test_counts_follow_the_keys_in_and_out(moves):
    counts: dict[str, int] = {}
    expected: Counter[str] = Counter()
    for add, key in moves:
        if add:
            tally.add(counts, key)
            expected[key] += 1
        elif expected[key]:
            tally.drop(counts, key)
            expected[key] -= 1
    # a key counted down to zero is gone, not kept at zero
    assert counts == {key: n for key, n in expected.items() if n}
