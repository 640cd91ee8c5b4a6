"""Each rule's Chinese path and each guard is held by a case that fails without it.

A case here is judged twice: as the detector is, where it passes, and with one piece of the
detector changed (a rule's handling of text without spaces turned off, or a guard widened),
where it must fail. So a change that drops a rule's zh path or widens a guard cannot pass the
suite: the matrix (``test_detect_matrix.py``) holds the same cases among many others.
"""

from __future__ import annotations

import re

import pytest
from tests.support import loopgen
from tests.test_detect_matrix import cut_problem, time_problem, whole

from looprescue.detect import segment, shape
from looprescue.detect.rules import periodic, pool, renumbered


def _judged(case: loopgen.Case) -> str | None:
    """What is wrong with the detector's answer for ``case`` (None: nothing)."""
    hit = whole(case)
    if not case.is_loop:
        return None if hit is None else f"healthy text cut by {hit.rule}"
    if hit is None:
        return "loop not found"
    return cut_problem(case, hit) or time_problem(case, hit)


def _fires_within_300_wide(case: loopgen.Case) -> str | None:
    """A Chinese pool is cut within ~300 wide of its onset (~150 CJK chars and their marks),
    as an English one is within 300 chars: tighter than the matrix's slack of a stride."""
    problem = _judged(case)
    if problem is not None:
        return problem
    hit = whole(case)
    assert hit is not None and case.onset is not None
    too_late = loopgen.width(case.text[case.onset : hit.fired_at]) > 300 + 3 * case.unit_width
    return f"fired {hit.fired_at - case.onset} chars in" if too_late else None


def _cases(shape_name: str, lang: str, channel: str, seps=("none", "space", "newline")):
    return [loopgen.make(shape_name, seed, lang, sep, channel) for seed in range(2) for sep in seps]


def _no_cjk_width(monkeypatch: pytest.MonkeyPatch, module) -> None:
    monkeypatch.setattr(module, "text_width", len)


MUTATIONS = {
    # the pool counts a CJK char as two: without it a Chinese pool fires late or never
    "pool width": (
        lambda mp: _no_cjk_width(mp, pool),
        lambda: _cases("pool", "zh", "reasoning"),
        _fires_within_300_wide,
    ),
    # a full stop without a space after it ends a Chinese sentence
    "full-width sentence end": (
        lambda mp: mp.setattr(segment, "SENTENCE_END", re.compile(r"[.!?\n](?:(?<=\n)|(?=\s))")),
        lambda: _cases("pool", "zh", "reasoning"),
    ),
    # renumbered counts a CJK item's width
    "renumbered width": (
        lambda mp: _no_cjk_width(mp, renumbered),
        lambda: _cases("numbered_item", "zh", "text"),
    ),
    # the periodic rules count copies of a CJK unit by its width
    "periodic width": (
        lambda mp: mp.setattr(shape, "NO_SPACES_SCRIPT", re.compile(r"[\x00]")),
        lambda: _cases("word_repeat", "zh", "reasoning") + _cases("numbered_item", "zh", "text"),
    ),
    # the guard that calls a template of a few letters a chant, widened
    "tiny template guard": (
        lambda mp: mp.setattr(periodic, "TINY_TEMPLATE_LETTERS", 8),
        lambda: [
            loopgen.make("asked_list", seed, "zh", "none", channel)
            for seed in range(8)
            for channel in loopgen.CHANNELS
        ],
    ),
    # a young pool batch is one to three phrases: widened, a block of sentences is cut as a
    # pool mid-copy instead of by a cycle after one copy
    "young batch guard": (
        lambda mp: mp.setattr(pool, "YOUNG_BATCH_PHRASES", 12),
        lambda: [
            loopgen.make("paragraph_blocks", seed, "zh", "random", "reasoning")
            for seed in (1966855, 1, 2)
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_mutation_is_caught(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mutate, cases, *how = MUTATIONS[name]
    judged = how[0] if how else _judged
    held = cases()
    assert all(judged(case) is None for case in held), "the cases pass as the detector is"
    mutate(monkeypatch)
    assert any(judged(case) is not None for case in held), f"{name}: nothing failed"
