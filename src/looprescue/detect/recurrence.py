"""Where the last chars of a growing text occurred before: the watermark's n-gram index.

The watermark (``PeriodicRule.safe_offset``) holds back the longest suffix of the folded text
that already occurred within ``cycleMaxPeriod`` chars. Searching for it with ``str.rfind``
costs a scan of the whole period range on every call (the last, failing, try), so a caller
that asks after every delta of a few chars pays thousands of char comparisons for each.

This index is the hash chain of LZ77 compressors (zlib's ``head`` and ``prev``): a table from
the hash of three chars to the last place such three chars ended, and for every place the one
before it with the same hash. A recurring suffix of three chars or more ends where its last
three chars occurred before, so the search walks that chain, nearest first, and compares only
there (a hash is shared by other trigrams now and then: the comparison tells them apart).
Indexing costs a few list operations per char (fixed tables, and a chain trimmed to the
range).
"""

from __future__ import annotations

from typing import Final, cast

# Slots of the hash tables (powers of two). A chain walk meets about (period range / slots)
# other trigrams on its way: 1024 keeps that to a handful for the 4000-char default range, and
# the tables small (three lists of 1024 ints per watched channel).
_SLOTS: Final = 1024
_MASK: Final = _SLOTS - 1
# Chain entries behind the range are dropped in blocks of this many (amortized O(1) per char).
TRIM_SLACK: Final = 1024


class SuffixIndex:
    """Where the chars of a text ended before, by the absolute offset they end at.

    ``update`` indexes the chars appended since the last call. ``before(end)`` is an earlier
    end of a trigram with the hash of the one ending at ``end`` (-1: none; callers compare the
    chars and stop once an offset is out of their range). ``latest(n)`` is the last place before
    the text's end where a string with the hash of its last ``n`` (1-3) chars ended.
    """

    __slots__ = (
        "_chain",
        "_chain_base",
        "_count",
        "_h1",
        "_h2",
        "_heads",
        "_indexed",
        "_latest",
        "_range",
        "_trim_slack",
    )

    def __init__(self, lag_range: int, trim_slack: int = TRIM_SLACK) -> None:
        self._range = lag_range  # how far back a chain is followed (older entries are dropped)
        self._trim_slack = trim_slack
        self._indexed = 0  # absolute offset up to which chars are indexed
        self._count = 0  # chars indexed in a row (an n-gram needs n of them)
        self._h1 = 0  # hash of the last char indexed, and of the last two
        self._h2 = 0
        # Latest end per hash: one table each for one, two and three chars. The tables and the
        # chain hold the offsets as the objects they are (typed ``object``, compiled code copies
        # a reference where an ``int`` would be unboxed and boxed again: an offset is boxed
        # once, when its char is indexed).
        self._heads: list[list[object]] = [[-1] * _SLOTS, [-1] * _SLOTS, [-1] * _SLOTS]
        # Where each hash ended the time before: the latest(n) of the last end, n = 1..3, and
        # for trigrams every end's predecessor (_chain[end - _chain_base]).
        self._chain: list[object] = []
        self._chain_base = 1
        self._latest: list[object] = [-1, -1, -1]

    def update(self, text: str, base: int, end: int) -> None:
        """Index ``text`` (whose first char is at absolute offset ``base``) up to ``end``."""
        start = self._indexed
        if start < base:
            # The window moved past chars never indexed: go on from its start.
            start = base
            self._count = 0
            self._chain = []
            self._chain_base = base + 1
        if start >= end:
            return
        chain = self._chain
        keep_from = end - self._range - 4  # no walk goes further back than this
        if keep_from - self._chain_base > self._trim_slack:
            drop = min(keep_from - self._chain_base, len(chain))
            del chain[:drop]
            self._chain_base += drop
        head1, head2, head3 = self._heads[0], self._heads[1], self._heads[2]
        h1, h2, count = self._h1, self._h2, self._count
        none: object = -1
        p1 = p2 = none
        for i in range(start - base, end - base):
            c = ord(text[i])
            p: object = base + i + 1
            h3 = ((h2 * 33) ^ c) & _MASK  # the last three chars' hash (h2 is of the two before)
            h2 = ((h1 * 33) ^ c) & _MASK
            h1 = c & _MASK
            p1 = head1[h1]
            head1[h1] = p
            p2 = p3 = none
            if count >= 1:
                p2 = head2[h2]
                head2[h2] = p
                if count >= 2:
                    p3 = head3[h3]
                    head3[h3] = p
            chain.append(p3)
            count += 1
        self._h1, self._h2, self._count = h1, h2, count
        self._latest = [p1, p2, chain[-1]]
        self._indexed = end

    def before(self, end: int) -> int:
        """An earlier end of the trigram hash ending at ``end`` (indexed, in range), or -1."""
        at = end - self._chain_base
        return cast(int, self._chain[at]) if 0 <= at < len(self._chain) else -1

    def latest(self, n: int) -> int:
        """The last end before the text's end of the hash of its last ``n`` chars (1-3)."""
        return cast(int, self._latest[n - 1])
