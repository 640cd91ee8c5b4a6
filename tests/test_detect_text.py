"""The char sets the segmenter and the stutter rule check before a regex, and the check."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from looprescue.detect.shape import CLAUSE_MARK, CLAUSE_MARK_CHARS
from looprescue.detect.text import SENTENCE_END, SENTENCE_END_CHARS, any_char_in


def test_the_sentence_end_chars_are_the_chars_a_sentence_end_begins_with() -> None:
    # the segmenter skips a few chars holding none of them without the regex: the two must agree
    starts = {chr(c) for c in range(0x10000) if SENTENCE_END.match(chr(c) + " ") is not None}
    assert starts == SENTENCE_END_CHARS


@given(text=st.text(max_size=40), lo=st.integers(-5, 45), hi=st.integers(-5, 45))
def test_any_char_in_looks_at_the_chars_a_slice_would_hold(text: str, lo: int, hi: int) -> None:
    lo, hi = max(0, min(lo, len(text))), max(0, min(hi, len(text)))
    for chars in (SENTENCE_END_CHARS, CLAUSE_MARK_CHARS, frozenset("0123456789")):
        assert any_char_in(text, lo, hi, chars) == any(c in chars for c in text[lo:hi])


def test_the_clause_mark_chars_are_the_chars_a_clause_mark_is() -> None:
    marks = {chr(c) for c in range(0x10000) if CLAUSE_MARK.match(chr(c)) is not None}
    assert marks == CLAUSE_MARK_CHARS
