"""The loop matrix: every loop shape and every healthy shape of ``tests/support/loopgen.py``,
in Chinese, English and both, with every separator, in both channels and in any chunking.

A loop must be found within the bounds a person would hold it to, and cut at its onset: none
of a pool kept, one copy of a periodic unit at most. A healthy text must never be cut.

Bounds (widths count a CJK char as two, as the detector does; a rule runs every STRIDE chars,
so that much more may pass before it does):

* a unit a person spots in a few lines (up to ``SHORT_UNIT`` wide) is cut within about 300
  wide of loop text: ``SHORT_BOUND`` and two copies of the unit (the copy that completes the
  count, and the one being written);
* a longer unit within one copy past the third;
* a loop inside a code fence gets the fence's factor for a long line (``codeFenceRepeatFactor``
  is for short statements; a long line repeated back to back needs half again a cycle's
  copies): code means what it repeats more often than prose does.

Examples are drawn with fixed seeds (``derandomize``) so a run is reproducible;
``LOOPRESCUE_MATRIX_EXAMPLES`` draws more of them for a deeper run.
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support import loopgen
from tests.support.loopgen import Case, width

from looprescue.config import DetectorConfig
from looprescue.detect import Hit, StreamDetector
from looprescue.detect.asked import asked_ranges, asked_sections, largest_count
from looprescue.detect.channel import ChannelDetector
from looprescue.detect.copies import LONG_CODE_LINE_FACTOR
from looprescue.detect.limits import STRIDE

SHORT_UNIT = 150
SHORT_BOUND = 300
EXAMPLES = int(os.environ.get("LOOPRESCUE_MATRIX_EXAMPLES", "3"))

MATRIX = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)

chunkings = st.lists(st.integers(1, 48), min_size=1, max_size=4)


def run(case: Case, sizes: list[int]) -> Hit | None:
    """Stream the case in deltas whose sizes cycle through ``sizes``, as the proxy would, with
    the request's asked ranges and counts."""
    detector = StreamDetector(
        DetectorConfig(),
        watch="both",
        asked=asked_ranges(case.request),
        asked_up_to=largest_count(case.request),
        sections=asked_sections(case.request),
    )
    text, pos, i = case.text, 0, 0
    while pos < len(text):
        step = sizes[i % len(sizes)]
        hit = detector.feed(case.channel, text[pos : pos + step])
        pos += step
        i += 1
        if hit is not None:
            return hit
    return detector.flush(case.channel)


def whole(case: Case) -> Hit | None:
    """The case's hit fed as one text (``scan_text``, with the request)."""
    detector = ChannelDetector(
        case.channel,  # type: ignore[arg-type]
        DetectorConfig(),
        asked_ranges(case.request) if case.channel == "text" else (),
        asked_up_to=largest_count(case.request),
        sections=asked_sections(case.request) if case.channel == "text" else (),
    )
    return detector.feed(case.text) or detector.flush()


_PIECE = re.compile(r"(?<=[。！？.!?])\s*|\n+")


def _blank(text: str) -> bool:
    return not text.strip()


def cut_problem(case: Case, hit: Hit) -> str | None:
    """Why the cut is in the wrong place: it must keep nothing of the loop, or its first copy
    (and, for a unit with text between copies, up to the second copy)."""
    assert case.onset is not None and case.first_copy_end is not None
    text, cut = case.text, hit.prune_offset
    second = case.second_copy if case.second_copy is not None else case.first_copy_end
    at_onset = _blank(text[min(cut, case.onset) : max(cut, case.onset)])
    after_first = case.first_copy_end <= cut <= second or _blank(
        text[min(cut, case.first_copy_end) : max(cut, case.first_copy_end)]
    )
    # a loop that ran as one periodic unit from its onset (a pool whose first draws were one
    # phrase) keeps one copy of that unit, as any cycle does
    kept = text[case.onset : cut]
    one_unit = hit.period is not None and 0 < len(kept) <= hit.period
    one_unit = one_unit and text.startswith(kept, cut)
    # a pool's phrase said once before the cut and not again up to the hit is no phrase of
    # the pool yet, as far as anything could know: keeping it is no mistake
    unseen = cut > case.onset and all(
        piece.strip() not in text[cut : hit.fired_at]
        for piece in _PIECE.split(kept)
        if piece.strip()
    )
    if at_onset or after_first or one_unit or unseen:
        return None
    return (
        f"cut at onset{cut - case.onset:+d} by {hit.rule} (first copy ends at "
        f"+{case.first_copy_end - case.onset}): {text[min(cut, case.onset) : cut + 40]!r}"
    )


def time_problem(case: Case, hit: Hit) -> str | None:
    """Why the hit came too late (see the module docstring for the bounds)."""
    assert case.onset is not None and case.first_copy_end is not None
    seen = case.text[case.onset : max(case.onset, hit.fired_at - STRIDE)]
    unit_chars = case.period
    if case.unit_width <= SHORT_UNIT:
        limit = SHORT_BOUND + 2 * case.unit_width
        if case.shape in FENCED:
            limit = int(limit * LONG_CODE_LINE_FACTOR)
        late = width(seen) > limit
    else:
        late = len(seen) > 4 * unit_chars
    if late:
        return (
            f"fired {hit.fired_at - case.onset} chars ({width(seen)} wide before the last "
            f"stride) into a loop whose unit is {case.unit_width} wide, by {hit.rule}"
        )
    return None


FENCED = frozenset({"code_lines", "counted", "redefined_code"})

LOOP_SHAPES = sorted(loopgen.LOOPS)
HEALTHY_SHAPES = sorted(loopgen.HEALTHY)


# Shapes bounded by the asked ranges: they bound the answer, never the reasoning (which may
# well count past them while it plans). A counted template runs past every count the
# request names in either channel.
ANSWER_ONLY = frozenset({"overrun", "section_overrun"})
LOOP_CELLS = [
    (shape, lang, channel)
    for shape in LOOP_SHAPES
    for lang in loopgen.LANGS
    for channel in loopgen.CHANNELS
    if channel == "text" or shape not in ANSWER_ONLY
]


@pytest.mark.parametrize(("shape", "lang", "channel"), LOOP_CELLS)
@MATRIX
@given(
    seed=st.integers(0, 2**32),
    sep=st.sampled_from(loopgen.SEPARATORS),
    sizes=chunkings,
)
def test_loop_is_cut_in_time_at_its_onset(shape, lang, channel, seed, sep, sizes):
    case = loopgen.make(shape, seed, lang, sep, channel)
    hit = run(case, sizes)
    assert hit is not None, f"{shape}/{lang}/{sep}/{channel} not found"
    problems = [p for p in (cut_problem(case, hit), time_problem(case, hit)) if p]
    assert not problems, f"{shape}/{lang}/{sep}/{channel}: " + "; ".join(problems)
    # the same hit whatever the chunking
    assert whole(case) == hit


@pytest.mark.parametrize("channel", loopgen.CHANNELS)
@pytest.mark.parametrize("lang", loopgen.LANGS)
@pytest.mark.parametrize("shape", HEALTHY_SHAPES)
@MATRIX
@given(
    seed=st.integers(0, 2**32),
    sep=st.sampled_from(loopgen.SEPARATORS),
    sizes=chunkings,
)
def test_healthy_text_is_never_cut(shape, lang, channel, seed, sep, sizes):
    case = loopgen.make(shape, seed, lang, sep, channel)
    hit = run(case, sizes)
    assert hit is None, f"{shape}/{lang}/{channel} cut by {hit.rule}: {hit.evidence!r}"
    assert whole(case) is None
