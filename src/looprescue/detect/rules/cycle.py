"""Rule ``cycle``: the tail of the stream is one unit repeated back to back, copies equal.

What it catches: a periodic run of the folded text (``rules/periodic.py`` finds and tracks it)
whose copies are the same, numbers included, once there are enough of them for the unit's
shape (``copies.copies_needed``): a short phrase 10 times (``cycleShortRepeats``), a longer
unit once its copies fill ``cycleEarlyChars`` (a CJK char counted as two), a block of several
sentences or lines 4 times (``cycleBlockRepeats``), one clause inside a sentence 3 times
(``cycleClauseRepeats``), one letter 30 times (``cycleCharRepeats``); any unit but layout also
once ``cycleMinRepeats`` copies fill ``cycleMinChars``.

Why that is a loop: text says a thing once. Copies back to back that many times are what a
reader spots as stuck; a person repeats a word for emphasis, a refrain a few lines, never the
same words a dozen times in a row.

Not a loop (its guards): layout (rules, borders, table separators, whitespace) repeated;
numbers with punctuation (``1. 1. 1.``, ``0, 0, 0``) and marks (``#``, ``//``) need twice the
copies, being data or emphasis more often; inside a code fence the copies are
``codeFenceRepeatFactor`` times as many and the long-run chars ``codeFenceFactor`` times (code
repeats lines), except one long line of words repeated back to back (``LONG_CODE_LINE``), which
needs 1.5 times. Copies whose numbers differ are the ``counter`` rule's.

Where it cuts: after one copy of the unit, from where the repetition really starts (the run
followed back as far as it holds, reduced to its primitive period, moved to a line, item,
sentence or clause start inside the first copy: ``copies.natural_start``). A run whose copies
have numbers is followed back only as far as they are the same raw text (``PeriodicRule.
_same_from``): log lines or table rows whose numbers moved on until the model got stuck on one
stay. A rotation of a
handful of very short phrases (``Now. OK. Emit.``) keeps none of it (``phrase_batch``): the
pool would cut it where its batch began, and the watermark held it from there.
"""

from __future__ import annotations

import math
import re
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.limits import HOLD_CHARS, pool_horizon
from looprescue.detect.shape import text_width
from looprescue.detect.text import LineKind, classify_line, normalize_phrase

# A sentence (or the rest of the text after the last sentence end), as the segmenter cuts them.
_SENTENCE: Final = re.compile(r"[^。！？\n]*?(?:[。！？\n]|[.!?](?=\s)|$)\s*")
_ENDS_SENTENCE: Final = re.compile(r"(?:[。！？\n]|[.!?]\s)\s*$")


def cycle_ready(
    cfg: DetectorConfig,
    need: float,
    copies: float,
    raw_chars: int,
    more_copies: float,
    more_chars: float,
) -> bool:
    """Whether ``copies`` of a unit that needs ``need`` (``copies.copies_needed``) are a cycle,
    with a fence's factors (``more_copies``, ``more_chars``; 1 outside one): enough copies for
    its shape, or ``cycleMinRepeats`` copies filling ``cycleMinChars``."""
    return copies >= need * more_copies or (
        copies >= cfg.cycleMinRepeats and raw_chars >= cfg.cycleMinChars * more_chars
    )


def phrase_batch(cfg: DetectorConfig, structural: bool, unit: str, copies: float) -> bool:
    """Whether the unit is a handful of short phrases the pool rule would count
    (``Now. OK. Emit. Producing.``): such a loop keeps none of them, like a pool. The
    watermark held them all along, as the start of a run of short sentences that could
    still become a pool (``streak.UnitRun``): every phrase is short, there are few, the
    run they are in is no longer than the pool's horizon, and none is structure."""
    sentences = [s for s in _SENTENCE.findall(unit) if s.strip()]
    if len(sentences) < 2 or len(sentences) * math.ceil(copies) >= pool_horizon(cfg):
        return False  # one phrase alone is a cycle (its first copy is kept)
    if not _ENDS_SENTENCE.search(unit):
        return False  # the pool only counts sentences that end
    if structural and any(
        classify_line(line.strip()) is not LineKind.PROSE
        for line in unit.split("\n")
        if line.strip()
    ):
        return False
    phrases = set()
    for sentence in sentences:
        phrase = normalize_phrase(sentence)
        if not phrase or text_width(phrase) > HOLD_CHARS:
            return False  # only a run of very short phrases is held back as it comes
        phrases.add(phrase)
    return len(phrases) <= cfg.poolMaxPhrases
