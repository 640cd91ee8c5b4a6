"""Rule ``restate``: a continuation's answer writing again what the client already has."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from looprescue.config import load_config
from looprescue.corpus import random_deltas
from looprescue.detect import StreamDetector
from looprescue.detect.rules.restate import NEAR_NEW_WIDTH, ShownPieces, fold_unit, units_of

CONFIG = load_config(None, {})

# What SmolLM2 answered before its loop was cut (the client has it) ...
EMAIL = (
    "Subject: Request for a Meeting\n\n"
    "Dear Ms. Chen,\n\n"
    "I am writing to ask whether you could meet me next Tuesday to go over the budget. "
    "I would like to agree on the figures before the review on Friday.\n\n"
    "Thank you for your time.\n\n"
    "Best regards,\n\n"
)
# ... and what its continuation wrote: the email again, from its first line.
RESTART = (
    "Subject: Request for a Meeting\n\n"
    "Dear Ms. Chen,\n\n"
    "I am writing to ask whether you could meet me next Tuesday to go over the numbers. "
)
GOES_ON = (
    "Tom\n\nP.S. If Tuesday does not suit you, Wednesday morning would work as well, "
    "and I can bring the spreadsheets printed out.\n"
)


def judge(
    text: str, shown: str, seed: int = 0, channel: str = "text", loop: str = "", high: int = 6
) -> tuple:
    """(hit, the most chars the watermark released)."""
    detector = StreamDetector(CONFIG, watch="both", shown=shown, shown_loop=loop)
    released = 0
    for delta in random_deltas(text, random.Random(seed), 1, high):
        hit = detector.feed(channel, delta)
        if hit is not None:
            return hit, released
        safe = detector.safe_offset(channel)
        assert safe >= released
        released = safe
    hit = detector.flush(channel)
    return hit, (released if hit is not None else len(text))


def test_units_are_the_sentences_and_lines_that_say_something() -> None:
    assert units_of(EMAIL) == [
        "Subject: Request for a Meeting",
        "I am writing to ask whether you could meet me next Tuesday to go over the budget.",
        "I would like to agree on the figures before the review on Friday.",
        "Thank you for your time.",
    ]
    assert units_of("```python\nreturn x\n}\n------------------------\n") == []
    # a CJK char counts twice: ten of them say as much as twenty letters
    assert units_of("数据会按顺序发送出去。") == ["数据会按顺序发送出去。"]
    assert units_of("数据按顺序发送。") == []


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40))
def test_a_restart_is_cut_at_the_continuations_start_and_never_shown(seed: int, high: int) -> None:
    hit, released = judge(RESTART, EMAIL, seed, high=high)
    assert hit is not None and hit.rule == "restate"
    assert hit.prune_offset == hit.loop_start == 0
    assert released == 0
    assert hit.evidence == "Subject: Request for a Meeting"


def test_a_continuation_that_goes_on_is_left_alone_and_released() -> None:
    hit, released = judge(GOES_ON, EMAIL)
    assert hit is None and released == len(GOES_ON)


def test_restating_the_last_sentence_before_going_on_is_no_restart() -> None:
    text = "Thank you for your time.\n\n" + GOES_ON
    shown = EMAIL.removesuffix("Best regards,\n\n")
    hit, _ = judge(text, shown)
    assert hit is None


def test_the_last_sentence_followed_by_an_earlier_one_is_a_restart() -> None:
    shown = EMAIL.removesuffix("Best regards,\n\n")
    text = "Thank you for your time.\n\nSubject: Request for a Meeting\n\n" + GOES_ON
    hit, released = judge(text, shown)
    assert hit is not None and hit.prune_offset == 0 and released == 0


@pytest.mark.parametrize(
    "block",
    [
        "I am writing to ask whether you could meet me next Tuesday to go over the budget. "
        "I would like to agree on the figures before the review on Friday. ",
        # near copies: their punctuation changed
        "I am writing to ask whether you could meet me next Tuesday to go over the budget! "
        "I would like to agree on the figures, before the review on Friday. ",
    ],
)
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_two_restated_sentences_in_a_row_later_on_are_cut_where_they_begin(
    block: str, seed: int
) -> None:
    new = "Wednesday morning would work as well, if that suits you better. "
    text = new + block + "See you then."
    hit, released = judge(text, EMAIL, seed)
    assert hit is not None and hit.prune_offset == len(new)
    assert released <= hit.prune_offset


def test_one_restated_sentence_later_on_is_a_quotation() -> None:
    text = (
        "Wednesday morning would work as well, if that suits you better. "
        "Thank you for your time. As for the agenda, the budget comes first and the hiring "
        "plan second.\n"
    )
    hit, released = judge(text, EMAIL)
    assert hit is None and released == len(text)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_the_kept_copy_of_the_loop_said_again_is_the_loop_resuming(seed: int) -> None:
    loop = "你可以在这里提供一个邮件，我可以在这里提供一个邮件。"
    shown = "下面是请假邮件的写法。\n\n" + loop
    # at the start: the shown answer's last sentence, but it is the loop's copy
    hit, released = judge(loop + "经理您好，我想请两天假。", shown, seed, loop=loop)
    assert hit is not None and hit.prune_offset == 0 and released == 0
    # later on: cut where it begins
    text = "经理您好，我因家中有事，想在下周一和周二请两天假。" + loop
    hit, released = judge(text, shown, seed, loop=loop)
    assert hit is not None and hit.prune_offset == text.index(loop)
    assert released <= hit.prune_offset


def test_a_code_block_written_again_is_a_restart() -> None:
    shown = (
        "```python\nimport requests\n\ndef count_words(url: str) -> int:\n"
        "    response = requests.get(url, timeout=10)\n"
    )
    text = (
        "```python\ndef count_words(url: str) -> int:\n"
        "    response = requests.get(url, timeout=10)\n    return len(response.text.split())\n```\n"
    )
    hit, released = judge(text, shown)
    assert hit is not None and hit.prune_offset == 0 and released == 0


def test_short_lines_are_neither_restated_nor_new() -> None:
    shown = "Best regards,\n}\nOK.\n" + EMAIL
    text = "Best regards,\n}\nOK.\n" + GOES_ON
    hit, released = judge(text, shown)
    assert hit is None and released == len(text)


@pytest.mark.parametrize("shown", ["", EMAIL])
def test_reasoning_and_first_answers_are_never_judged(shown: str) -> None:
    hit, _ = judge(RESTART, shown, channel="reasoning")
    assert hit is None
    hit, _ = judge(EMAIL + EMAIL, "")  # no shown answer: not a continuation
    assert hit is None or hit.rule != "restate"


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12))
def test_any_chunking_gives_the_same_hit(seed: int, high: int) -> None:
    text = GOES_ON + RESTART
    whole = StreamDetector(CONFIG, watch="both", shown=EMAIL)
    expected = whole.feed("text", text) or whole.flush("text")
    hit, _ = judge(text, EMAIL, seed, high=high)
    assert hit == expected


def test_a_continuation_of_short_lines_is_not_held_for_long() -> None:
    fruits = [
        "apple",
        "pear",
        "plum",
        "fig",
        "kiwi",
        "lime",
        "lemon",
        "mango",
        "melon",
        "peach",
        "grape",
        "cherry",
    ]
    text = "".join(f"- {fruit}\n" for fruit in fruits)
    detector = StreamDetector(CONFIG, watch="both", shown=EMAIL)
    detector.feed("text", text[:40])  # six short lines
    assert detector.safe_offset("text") > 0
    assert (detector.feed("text", text[40:]) or detector.flush("text")) is None


SPACED_SUBJECT = "Subject:" + " " * 300 + "Request for a Meeting"
PIECES = [
    *units_of(EMAIL),
    "Best regards,",
    "}",
    "```",
    "Wednesday morning would work as well, if that suits you better.",
    "The spreadsheets are on the shared drive under budget/2026.",
    "数据会按顺序发送出去。",
    SPACED_SUBJECT,
    # near copies: punctuation changed, and two sentences joined
    "I am writing to ask whether you could meet me next Tuesday to go over the budget!",
    "I would like to agree on the figures, before the review on Friday.",
    "I am writing to ask whether you could meet me before the review on Friday.",
    # a word new: not a copy
    "I would like to agree on the numbers before the review on Friday.",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(PIECES), st.sampled_from([" ", "\n", "\n\n", "  \n"])),
        min_size=1,
        max_size=8,
    ),
    st.integers(0, 10_000),
    st.integers(1, 30),
)
@example(
    [
        (SPACED_SUBJECT, "\n\n"),
        (SPACED_SUBJECT, "\n"),
        (SPACED_SUBJECT, "\n"),
        (SPACED_SUBJECT, "\n"),
    ],
    0,
    1,
)
def test_the_watermark_never_passes_the_cut_and_any_chunking_agrees(
    pieces: list[tuple[str, str]], seed: int, high: int
) -> None:
    text = "".join(piece + gap for piece, gap in pieces)
    whole = StreamDetector(CONFIG, watch="both", shown=EMAIL, shown_loop=units_of(EMAIL)[-1])
    expected = whole.feed("text", text) or whole.flush("text")
    hit, released = judge(text, EMAIL, seed, loop=units_of(EMAIL)[-1], high=high)
    # the same cut in any chunking; what went out past it before a rule that holds nothing
    # found it is the streamed hit's lead-in
    assert (hit is None) == (expected is None)
    if hit is not None and expected is not None:
        assert replace(hit, lead_in=0) == replace(expected, lead_in=0)
        assert hit.lead_in >= expected.lead_in
        # never past the rule's own cut: the near-copies a cut moves back over may have gone
        # out already (its lead-in; hypothesis found a copy said before the run, whitespace
        # apart, that a periodic cut walks back over)
        assert released <= hit.prune_offset + hit.lead_in


# What the client had of SmolLM2's answer to 什么是光合作用？ after two cuts (make e2e) ...
PHOTOSYNTHESIS = (
    "光合作用是一种编界的生命空氣，它可以福制地挖掖空氣，使光花灭火、黑球、上下院等于这种生命空氣。"
    "\n\n请接着再回原文里提到的一句话，可以让人觉寒一下：\n\n"
    "1. 你可以在上面的回答中使用一个全属的编界；\n"
    "2. 你可以使用一个全属的编界；，这就是一种生命空氣。\n"
)
# ... and its third attempt: the head of item 1 joined to the tail of item 2, then the heading
# with its punctuation changed.
JOINED = (
    "你可以在上面的回答中使用一个全属的编界；，这就是一种生命空氣。\n\n"
    "请接着再回原文里提到的一句话：\n\n1"
)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 12))
def test_pieces_of_shown_sentences_joined_are_a_restart(seed: int, high: int) -> None:
    hit, released = judge(JOINED, PHOTOSYNTHESIS, seed, high=high)
    assert hit is not None and hit.rule == "restate"
    assert hit.prune_offset == 0 and released == 0
    assert hit.evidence.startswith("你可以在上面的回答中")


@pytest.mark.parametrize(
    ("shown", "text"),
    [
        # parallel list items: each says one new word
        (
            "1. Add the sugar to the bowl and stir well.\n",
            "2. Add the flour to the bowl and stir well.\n"
            "3. Add the butter to the bowl and stir well.\n"
            "4. Add the eggs to the bowl and stir well.\n",
        ),
        # a counter template: each says one new number
        (
            ".row-1 { height: 10px; margin: 0 auto; }\n",
            "".join(f".row-{n} {{ height: 10px; margin: 0 auto; }}\n" for n in range(2, 41)),
        ),
        (
            "1. 把糖放进碗里，搅拌均匀。\n",
            "2. 把面粉放进碗里，搅拌均匀。\n3. 把鸡蛋放进碗里，搅拌均匀。\n",
        ),
    ],
)
def test_a_new_word_or_number_makes_a_sentence_new(shown: str, text: str) -> None:
    hit, released = judge(text, shown)
    assert hit is None and released == len(text)


def test_a_new_sentence_is_released_before_it_ends() -> None:
    opening = "Wednesday morning would work as well, if that suits you better. "
    sentence = "As for the agenda, the budget comes first and the hiring plan second."
    detector = StreamDetector(CONFIG, watch="both", shown=EMAIL)
    assert detector.feed("text", opening + sentence[:30]) is None
    assert detector.safe_offset("text") > len(opening)


def test_near_copy_counts_marks_but_no_new_word() -> None:
    pieces = ShownPieces(fold_unit(EMAIL))
    assert pieces.near_copy("I would like to agree on the figures; before the review on Friday!")
    assert not pieces.near_copy("I would like to agree on the numbers before the review on Friday.")
    # marks wider than a word or two are not a copy's
    marks = "-" * (NEAR_NEW_WIDTH + 1)
    assert not pieces.near_copy(f"Thank you for your time. {marks} Thank you for your time.")
    assert pieces.near_copy("Thank you for your time. -- Thank you for your time.")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["I would like to agree", " on the figures", "，这就是一种生命空氣。"]),
            st.text(alphabet="ab ,;。你", max_size=4),
        ),
        max_size=8,
    )
)
def test_what_a_head_settles_as_new_stays_new(parts: list[str]) -> None:
    """The watermark holds a unit back while its settled new chars allow a near copy: they
    never shrink as it grows, and never exceed what the whole unit is judged by."""
    pieces = ShownPieces(fold_unit(EMAIL + PHOTOSYNTHESIS))
    unit = "".join(parts)
    settled = [pieces.settled_new_width(unit[:size]) for size in range(len(unit) + 1)]
    assert settled == sorted(settled)
    if pieces.near_copy(unit):
        assert settled[-1] <= NEAR_NEW_WIDTH
