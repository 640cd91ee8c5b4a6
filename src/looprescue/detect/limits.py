"""Limits that several rules share: one value each, so the rules that read it cannot drift apart.

A limit one rule alone reads stays in that rule's module. The tunable thresholds are config keys
(``DetectorConfig``); these are fixed by how the detector works.
"""

from __future__ import annotations

from typing import Final

from looprescue.config import DetectorConfig

# Rules that judge the window run every STRIDE chars of the channel, at absolute offsets, so the
# same text meets the same checkpoints in any chunking. 128 keeps the delay well below the 600
# chars a cycle needs anyway, and makes the work per delta a list append.
STRIDE: Final = 128

# Units (sentences, lines) longer than this are judged by their length alone, never read as a
# phrase, a clause run or a restated unit: decisions must not depend on how much old text is held.
LONG_UNIT: Final = 4096

# A batch of repeated units (pool phrases, short lines, imports) comes back to one of its
# members within this many units: reshuffled units repeat early (a fixed rotation is a cycle).
REPEAT_WITHIN: Final = 8

# Share of the units from a batch's onset on that its members keep (pool, imports): lower than a
# firing coverage, as a batch's first appearances include variants that never come back.
ONSET_COVERAGE: Final = 0.5

# Phrases at most this wide (``Go.``, ``Let me write.``, ``输出。``; a CJK char counted as two)
# are what a pool's batch is made of, and only a run of them is held back while a pool may form;
# a periodic loop of such phrases is cut where the batch began, as the pool would cut it.
HOLD_CHARS: Final = 20

# Windows of sentences a pool's run keeps past its start: a pool is confirmed within a window or
# two of its start.
HORIZON_WINDOWS: Final = 3

# The narrowest phrase a pool is made of: one CJK char and its full stop (``好。``, 3 wide).
NARROWEST_PHRASE: Final = 3

# A clause of words, as a stutter repeats it (rules ``stutter`` and ``cycle``), has at least this
# many letters: a word or a short cry said again (``very, very``, ``加油，加油``) is emphasis.
CLAUSE_LETTERS: Final = 6


def pool_horizon(cfg: DetectorConfig) -> int:
    """Sentences of the current run kept (and held back) while a pool may still form: a
    window or two past the start, and enough of the narrowest phrases to fill
    ``poolMinChars`` (a pool of ``好。/输出。`` written without spaces needs a hundred).
    A periodic loop of more phrases than this is no batch the pool could have held."""
    return HORIZON_WINDOWS * cfg.poolWindow + cfg.poolMinChars // NARROWEST_PHRASE
