"""The numbered range a request asks for: "the numbers from 1 to 50", "task_1 到 task_10".

A counted list's text cannot say where it should stop; only the request can. The ``overrun``
rule (``rules/overrun.py``) reads the ranges found here to tell a list the user asked for from
one that counts on past it.
"""

from __future__ import annotations

import re
from typing import Final

# Ranges of fewer items bound no list worth watching ("1-2 paragraphs", "3-5 examples"): a
# model that writes a few more items than asked is not stuck.
MIN_ASKED_ITEMS: Final = 5
MAX_ASKED: Final = 100_000

# start and end with the same name in front of both ("task_1 to task_10", ".row-1 through
# .row-40"), or none; the end is a whole number (not a date's month, not a version's part)
_RANGE: Final = re.compile(
    r"(?<![\w.])(?P<name>[A-Za-z_.\-]{0,24}?)(?P<start>\d{1,6})\s*"
    r"(?:to|through|thru|until|-|–|—|~|～|到|至)\s*"
    r"(?P=name)(?P<end>\d{1,6})(?![\d.]\d|[\w])",
    re.IGNORECASE,
)


def asked_ranges(text: str) -> tuple[tuple[int, int], ...]:
    """The numbered ranges ``text`` asks for, as (first, last) pairs, in order."""
    found = []
    for match in _RANGE.finditer(text):
        start, end = int(match["start"]), int(match["end"])
        if end - start + 1 >= MIN_ASKED_ITEMS and end <= MAX_ASKED:
            found.append((start, end))
    return tuple(found)
