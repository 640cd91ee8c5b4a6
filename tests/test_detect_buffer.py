"""The text window's folded view: the same whatever the pieces it was synced in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from looprescue.detect.buffer import MARK_CHARS, TextWindow, fold

# digits, ordinal letters and their neighbours, sentence ends, CJK and whitespace: what folding
# turns on
PIECES = ["21st", "3rd", "12th", "99", "\n\n", "。\n", ". "]
ALPHABET = st.sampled_from([*"0123456789snrtdhx .\n中文。，,;!?！\u3000", *PIECES])
TEXTS = st.lists(ALPHABET, max_size=120).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, sizes=st.lists(st.integers(1, 20), min_size=1, max_size=6))
def test_the_folded_view_does_not_depend_on_the_pieces(text: str, sizes: list[int]) -> None:
    win = TextWindow(keep=10_000)
    pos = i = 0
    while pos < len(text):
        piece = text[pos : pos + sizes[i % len(sizes)]]
        pos, i = pos + len(piece), i + 1
        win.pending.append(piece)
        win.end += len(piece)
        win.sync()  # as the watermark does after every delta
    assert win.folded == fold(text)
    assert len(win.folded) == win.fend
    # the last char a per-delta step must look at (a digit, a sentence end, a clause mark)
    assert win.last_mark == max((i for i, c in enumerate(text) if c in MARK_CHARS), default=-1)
    # every folded char maps back into the raw text, in order
    raws = [win.raw_of(f) for f in range(win.fend)]
    assert raws == sorted(raws) and all(0 <= r < max(1, len(text)) for r in raws)
    # and back: a folded char's raw start folds to it
    assert all(win.folded_of(r) == f for f, r in enumerate(raws))


def test_whitespace_after_a_sentence_end_is_layout() -> None:
    # copies run together, spaced or set as paragraphs are one period
    assert fold("递归。递归。\n\n递归。\n") == "递归。递归。递归。"
    assert fold("Go on. Go on.\n\nGo on.\n") == "Go on. Go on. Go on. "
    # whitespace anywhere else is text: code indentation, lines of a list, words
    assert fold("if x:\n    y\n- a\n- b") == "if x:\n    y\n- a\n- b"
