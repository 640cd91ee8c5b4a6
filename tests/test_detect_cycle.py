"""Rules cycle and counter: verbatim and digit-masked periodic tails."""

from __future__ import annotations

import random
import string

import pytest
from tests.detect_helpers import stream

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector, scan_text

PREAMBLE = (
    "The failing test builds the session header before the lock is taken, so a second "
    "writer can slip in between. I will move the header write after the flock call.\n"
)


def _unit(length: int) -> str:
    """A word-like unit of exactly ``length`` chars, no digits, no internal repeats."""
    rng = random.Random(length)
    words = [
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
        for _ in range(length)
    ]
    text = " ".join(words)[: length - 1] + "\n"
    assert len(text) == length
    return text


@pytest.mark.parametrize("period", [16, 89, 121, 235, 974, 4000])
def test_cycle_fires_on_each_period_in_range_and_prunes_at_second_copy(period):
    unit = _unit(period)
    copies = max(4, -(-700 // period) + 1)
    text = PREAMBLE + unit * copies
    hit = stream(text, "text", sizes=(2, 5, 3))
    assert hit is not None and hit.rule == "cycle"
    assert hit.period == period
    # the first copy is kept whole, everything from the second copy on is loop text
    assert hit.prune_offset == len(PREAMBLE) + period
    assert text[: hit.prune_offset].endswith(unit)
    assert hit.repeats >= 3


def test_two_copies_are_never_a_cycle():
    for size in (40, 150, 900):
        assert scan_text(PREAMBLE + _unit(size) * 2 + "Then the tests passed.", "reasoning") == []


@pytest.mark.parametrize(
    ("size", "copies"),
    # short units: 10 copies; longer ones once their copies fill 300 chars; never under 3
    [(12, 10), (20, 10), (40, 8), (60, 5), (100, 3), (250, 3)],
)
def test_copies_a_unit_with_words_needs(size, copies):
    unit = _unit(size)
    tail = "Then I ran the tests and they passed, so the change is complete."
    assert scan_text(PREAMBLE + unit * (copies - 1) + tail, "reasoning") == []
    hit = stream(PREAMBLE + unit * (copies + 200 // size + 2), "reasoning")
    assert hit is not None and hit.rule == "cycle" and hit.period == size
    assert hit.prune_offset == len(PREAMBLE) + size
    # judged at the first checkpoint (every 128 chars) after the copies are there
    assert copies * size <= hit.fired_at - len(PREAMBLE) < copies * size + 128 + 24


@pytest.mark.parametrize(
    ("sentence", "copies"),
    # 26 and 34 CJK chars say what 52 and 68 English chars do: 6 and 5 copies, not 10 and 9
    [
        ("你可以在这里提供一个邮件，我可以在这里提供一个邮件。", 6),
        ("递归函数是一种简单的递归函数，它可以返回一个函数，用于返回一个函数。", 5),
    ],
)
def test_a_cjk_sentence_fills_the_early_chars_at_two_per_char(sentence, copies):
    lead = "下面是我的回答。\n"
    assert scan_text(lead + sentence * (copies - 1) + "\n\n谢谢。", "text") == []
    hit = stream(lead + sentence * (copies + 10), "text")
    assert hit is not None and hit.rule == "cycle" and hit.period == len(sentence)
    assert hit.prune_offset == len(lead) + len(sentence)
    assert copies * len(sentence) <= hit.fired_at - len(lead) < copies * len(sentence) + 128 + 24


def test_period_above_the_configured_maximum_is_not_a_cycle_unless_raised():
    unit = _unit(4100)
    text = PREAMBLE + unit * 3
    assert scan_text(text, "text") == []
    config = DetectorConfig(cycleMaxPeriod=5000)
    hits = scan_text(text, "text", config)
    assert hits and hits[0].rule == "cycle" and hits[0].period == 4100


def test_single_letter_degeneration_keeps_one_letter():
    text = "Here is a simple example of Java Junit" + "o" * 800
    hit = stream(text, "text")
    assert hit is not None and hit.rule == "cycle"
    assert hit.period == 1  # found through a multiple, reduced to the primitive period
    assert hit.prune_offset == len("Here is a simple example of Java Junit") + 1
    assert hit.fired_at <= 38 + 30 + 128  # 30 letters, then the next checkpoint


def test_counter_loop_only_matches_with_digits_masked():
    body = "Tell me something about you?\nHere is answer number "
    text = "".join(f"{body}{n}.\n" for n in range(50, 99))
    hit = stream(text, "text")
    assert hit is not None and hit.rule == "counter"
    assert hit.period == len(body) + 4
    # with special chat tokens in it, the same echo is cut at its first end-of-turn token
    echo = "tell me something about you? <|im_end|>\n<|im_start|>assistant"
    tokens = "".join(f"{echo}{n}\n" for n in range(50, 99))
    hit = stream(tokens, "text")
    assert hit is not None and hit.rule == "echo" and hit.prune_offset == echo.index("<|im_end|>")


def test_numbered_single_lines_are_an_enumeration_not_a_counter_loop():
    # a numbered list or a log whose items differ only in their number is what was asked for
    body = "Step {n}: check the lock file, then retry the write once more.\n"
    many = "".join(body.format(n=n) for n in range(1, 60))
    assert scan_text(PREAMBLE + many, "text") == []
    assert scan_text(PREAMBLE + many, "reasoning") == []


def test_a_step_block_restated_with_a_new_number_is_a_counter_loop():
    block = "Step {n}:\nOpen the settings page.\nClick save and wait for the banner.\n\n"
    three = "".join(block.format(n=n) for n in range(8, 11))
    assert scan_text(PREAMBLE + three, "text") == []  # a block loop needs a cycle's 4 copies
    four = "".join(block.format(n=n) for n in range(8, 12))
    assert scan_text(PREAMBLE + four, "text")[0].rule == "counter"
    many = "".join(block.format(n=n) for n in range(8, 40))  # 9 -> 10 changes the length
    hits = scan_text(PREAMBLE + many, "text")
    assert hits and hits[0].rule == "counter" and hits[0].repeats >= 4
    # the one kept copy is the first block, found across the change from 9 to 10
    assert hits[0].loop_start == len(PREAMBLE)
    assert (PREAMBLE + many)[hits[0].loop_start : hits[0].prune_offset] == block.format(n=8)


def test_cycle_evidence_shows_the_unit():
    unit = "Now emit the grep call for the cleanup handler and then the retry loop\n"
    hit = stream(PREAMBLE + unit * 20, "reasoning")
    assert hit is not None
    assert hit.rule == "cycle"
    assert "Now emit the grep call" in hit.evidence


def test_the_real_974_char_visible_text_loop_is_a_cycle_on_its_own():
    # The permgate bleed is caught earlier by the pool rule; with pool and lines switched off
    # the cycle rule alone must still find its exact 974-char period.
    from tests.paths import CORPUS

    from looprescue.corpus import load_corpus

    record = next(r for r in load_corpus(CORPUS) if r.id == "mrwei-text-permgate-publish-loop")
    config = DetectorConfig(poolMinCoverage=1.0, poolMaxPhrases=2, linesMinDuplicateRatio=1.0)
    hits = scan_text(record.text, "text", config)
    assert hits and hits[0].rule == "cycle" and hits[0].period == 974
    assert hits[0].repeats >= 3


def test_a_run_of_one_digit_is_held_from_its_first_digit():
    # SmolLM2: "1. 第一种：序号：" then 958 ones. Folding makes eight digits one char, so the
    # suffix search saw the run only past its eighth digit and the first nine were let out
    # before the cut, which keeps none of them.
    lead = "1. 第一种：序号："
    text = lead + "1" * 300 + "2" * 3
    for step in (1, 2, 3, 5):
        detector, released, hit = StreamDetector(), 0, None
        for pos in range(0, len(text), step):
            hit = detector.feed("text", text[pos : pos + step])
            if hit is not None:
                break
            released = detector.safe_offset("text")
        assert hit is not None and hit.prune_offset == len(lead)
        assert released <= hit.prune_offset, step


def test_digits_of_healthy_numbers_are_let_out_when_the_number_ends():
    detector = StreamDetector()
    for piece in ("In 2024 we shipped 1", "1 releases and 300", "0 fixes. "):
        detector.feed("text", piece)
    assert detector.safe_offset("text") >= len("In 2024 we shipped 11 releases and 3000 fixes.")
