"""Counts of keys kept in a dict as units come into a window and leave it.

A key whose count falls to zero is dropped, so the dict holds the keys the window holds and
no more: its size stays bounded, and ``key in counts`` says whether the window has one.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")


def add(counts: dict[K, int], key: K) -> None:
    """Count one more ``key``."""
    counts[key] = counts.get(key, 0) + 1


def drop(counts: dict[K, int], key: K) -> None:
    """Count one ``key`` fewer (it must be counted), forgetting it at zero."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
