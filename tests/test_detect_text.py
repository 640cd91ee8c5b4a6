"""The sentence end pattern, and the char sets the window's mark scan is built from."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from looprescue.detect.shape import CLAUSE_MARK, CLAUSE_MARK_CHARS
from looprescue.detect.text import SENTENCE_END, SENTENCE_END_CHARS, number_set, numbers_said


def test_the_sentence_end_chars_are_the_chars_a_sentence_end_begins_with() -> None:
    # the segmenter skips text with none of them (TextWindow.last_mark): the two must agree
    starts = {chr(c) for c in range(0x10000) if SENTENCE_END.match(chr(c) + " ") is not None}
    assert starts == SENTENCE_END_CHARS


def test_the_clause_mark_chars_are_the_chars_a_clause_mark_is() -> None:
    marks = {chr(c) for c in range(0x10000) if CLAUSE_MARK.match(chr(c)) is not None}
    assert marks == CLAUSE_MARK_CHARS


ENDS_AND_NEIGHBOURS = st.text(
    alphabet=st.sampled_from(list("ab .!?。！？\ufffd\n\t\u3000中")), max_size=14
)


@given(text=ENDS_AND_NEIGHBOURS, pos=st.integers(0, 15), endpos=st.integers(0, 15))
def test_a_sentence_ends_at_a_cjk_stop_or_newline_or_at_a_stop_before_whitespace(
    text: str, pos: int, endpos: int
) -> None:
    # the rule as the segmenter's docs state it, against the compiled pattern
    expected = [
        i
        for i in range(pos, min(endpos, len(text)))
        if text[i] in "。！？\ufffd\n"
        or (text[i] in ".!?" and i + 1 < min(endpos, len(text)) and text[i + 1].isspace())
    ]
    found = [m.start() for m in SENTENCE_END.finditer(text, pos, endpos)]
    assert found == expected
    assert all(m.end() == m.start() + 1 for m in SENTENCE_END.finditer(text, pos, endpos))


def test_a_number_is_read_as_digits_however_it_is_said() -> None:
    # ``thirty minutes`` says what ``30 minutes`` does; a count word from two up, an ordinal
    text = "Even thirty minutes, or 30, of Four laps; 第四只 and one more, 2.5 in all."
    assert sorted(numbers_said(text)) == sorted(["30", "30", "4", "第四", "2.5"])
    words = frozenset(w.strip(",;.") for w in text.lower().split())
    assert number_set(text, words) == frozenset(numbers_said(text))
    assert numbers_said("Someone wrote a tone poem.") == []  # (no count word inside a word)
