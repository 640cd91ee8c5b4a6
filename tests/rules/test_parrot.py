"""Rule ``parrot``: a continuation's answer copying a sentence of its correction."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from looprescue.config import load_config
from looprescue.corpus import random_deltas
from looprescue.detect import StreamDetector
from looprescue.rescue.continuation import LoopSummary
from looprescue.rescue.marker import correction_sentences

CONFIG = load_config(None, {})
LOOP = LoopSummary(channel="text", phrase="1. 1. 1.")
SENTENCES = correction_sentences(LOOP, kept_text=True, lang="zh")
COPIED = "上一条回答开始重复，重复的部分已删除。"
ANSWER = "北京、上海、广州、深圳、成都。\n\n" + COPIED + "\n\n" + COPIED


def judge(text: str, seed: int, channel: str = "text", high: int = 6) -> tuple:
    """(hit, the most chars the watermark released)."""
    detector = StreamDetector(CONFIG, watch="both", correction=SENTENCES)
    released = 0
    for delta in random_deltas(text, random.Random(seed), 1, high):
        hit = detector.feed(channel, delta)
        if hit is not None:
            return hit, released
        safe = detector.safe_offset(channel)
        assert safe >= released
        released = safe
    return detector.flush(channel), released


def _held_as_the_other_rules_hold(text: str) -> StreamDetector:
    """A detector watching for the correction, fed ``text``, after checking that it holds back
    no more of it than one that does not watch."""
    watched = StreamDetector(CONFIG, watch="both", correction=SENTENCES)
    plain = StreamDetector(CONFIG, watch="both")
    for detector in (watched, plain):
        detector.feed("text", text)
    assert watched.safe_offset("text") == plain.safe_offset("text")
    return watched


def test_the_correction_has_the_sentence_a_small_model_copies() -> None:
    assert COPIED in SENTENCES
    # the tag is watched on its own, so a mangled sentence after it is caught too
    assert SENTENCES[0] == "[looprescue]"
    assert all(not s.startswith("[looprescue]") for s in SENTENCES[1:])


# SmolLM2's continuation of a Chinese list (make e2e, zh-list-cities): the copied sentence is
# mangled, the tag is not
MANGLED = (
    "1. 北京\n2. 上海\n3. 上一条回答写完。\n\n"
    "1. 上一条回答：[looprescue] 上一条回答开始重复，可以编辑我们的文档。\n"
)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40))
def test_the_tag_is_cut_where_it_begins_and_never_shown(seed: int, high: int) -> None:
    _cut_where_the_copy_begins(MANGLED, "[looprescue]", seed, high)


def test_a_bracketed_word_that_is_not_the_tag_is_released() -> None:
    text = "Options: [loop] and [rescue] are flags; [looprescuer] is another tool. Done.\n"
    for seed in range(5):
        assert judge(text, seed)[0] is None
    # nothing held beyond what the other rules hold
    watched = _held_as_the_other_rules_hold(text)
    watched.feed("text", "[looprescu")  # could be the tag's start: held
    assert watched.safe_offset("text") <= len(text)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40))
def test_a_copied_sentence_is_cut_where_it_begins_and_never_shown(seed: int, high: int) -> None:
    _cut_where_the_copy_begins(ANSWER, COPIED, seed, high)


def _cut_where_the_copy_begins(text: str, copy: str, seed: int, high: int) -> None:
    hit, released = judge(text, seed, high=high)
    assert hit is not None and hit.rule == "parrot"
    assert hit.prune_offset == text.index(copy)
    assert released <= hit.prune_offset


PROSE = (
    "The loader reads each layer from the manifest, checks its digest against the index, and "
    "unpacks it into a scratch directory before anything is renamed into place; a failed "
    "layer leaves the previous tree untouched, which is why an interrupted pull can simply be "
    "started again without cleaning up by hand. "
)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_one_copy_followed_by_an_answer_is_held_until_it_is_cut(seed: int) -> None:
    sentences = correction_sentences(LOOP, kept_text=True, lang="en")
    copied = max(sentences, key=len)
    text = PROSE + copied + " After that, the loader verifies the final tree once more."
    detector = StreamDetector(CONFIG, watch="both", correction=sentences)
    released, hit = 0, None
    for delta in random_deltas(text, random.Random(seed), 1, 6):
        hit = detector.feed("text", delta)
        if hit is not None:
            break
        released = max(released, detector.safe_offset("text"))
    hit = hit or detector.flush("text")
    assert hit is not None and hit.prune_offset == text.index(copied)
    assert released <= hit.prune_offset
    plain = StreamDetector(CONFIG, watch="both")
    plain.feed("text", text)
    assert plain.safe_offset("text") > text.index(copied)  # the other rules would release it


def test_an_answer_that_starts_like_a_sentence_and_goes_elsewhere_is_released() -> None:
    text = "北京、上海。\n\n同一段内容被反复地讨论过，但答案不同。广州和深圳也在名单上"
    for seed in range(5):
        assert judge(text, seed)[0] is None
    # it holds nothing more than the other rules do once the text went elsewhere
    watched = _held_as_the_other_rules_hold(text)
    watched.feed("text", "。同一段内容被反复")  # could be the copy's start again: held
    assert watched.safe_offset("text") <= len(text) + 1


def test_reasoning_may_restate_its_instructions() -> None:
    assert judge(ANSWER, 0, channel="reasoning")[0] is None


def test_without_a_correction_nothing_is_looked_for() -> None:
    detector = StreamDetector(CONFIG, watch="both")
    assert (detector.feed("text", ANSWER) or detector.flush("text")) is None
