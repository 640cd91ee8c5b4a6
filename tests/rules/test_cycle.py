"""Rule cycle: one unit repeated back to back, copies equal; and repetition that is no loop."""

from __future__ import annotations

import random
import string

import pytest
from tests.detect_helpers import CODE_BLOCK, PREAMBLE, stream

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector, scan_text


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


def test_cycle_evidence_shows_the_unit():
    unit = "Now emit the grep call for the cleanup handler and then the retry loop\n"
    hit = stream(PREAMBLE + unit * 20, "reasoning")
    assert hit is not None
    assert hit.rule == "cycle"
    assert "Now emit the grep call" in hit.evidence


def test_the_real_974_char_visible_text_loop_is_a_cycle_on_its_own():
    # The permgate bleed is caught earlier by the pool rule (and by reprise: its lines come
    # back in a new order); with pool, lines and reprise switched off the cycle rule alone
    # must still find its exact 974-char period.
    from tests.paths import CORPUS

    from looprescue.corpus import load_corpus
    from looprescue.detect.channel import ChannelDetector

    record = next(r for r in load_corpus(CORPUS) if r.id == "mrwei-text-permgate-publish-loop")
    config = DetectorConfig(poolMinCoverage=1.0, poolMaxPhrases=2, linesMinDuplicateRatio=1.0)
    detector = ChannelDetector("text", config)
    detector._window_rules = [r for r in detector._window_rules if "reprise" not in r.names()]
    hit = detector.feed(record.text) or detector.flush()
    assert hit is not None and hit.rule == "cycle" and hit.period == 974
    assert hit.repeats >= 3


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


STRIDE = 128  # checkpoints: a rule is judged at most this many chars after its evidence is in


LEAD = (
    "The user wants a short answer about the retry policy, so I will explain the backoff and "
    "the cap and then stop.\n\n"
)


def _fires_early(text: str, onset: int, within: int, channel: str = "text", keep: int = 0):
    hit = stream(text, channel, sizes=(3, 5, 2))
    assert hit is not None, "no loop found"
    assert hit.fired_at - onset <= within + STRIDE, hit
    assert onset <= hit.prune_offset <= onset + keep + 16, hit  # at most one copy (+ alignment)
    return hit


@pytest.mark.parametrize(
    "unit",
    ["<|endoftext|>\n", "**Note**\n", "Loading... ", "Repeat this ", "ABCDE", "好的", "🙂 yes "],
)
def test_a_short_unit_repeated_is_cut_within_about_300_chars(unit):
    hit = _fires_early(LEAD + unit * 60, len(LEAD), 300, keep=len(unit))
    assert hit.rule in ("cycle", "echo", "pool")


@pytest.mark.parametrize("channel", ["reasoning", "text"])
@pytest.mark.parametrize("sep", ["、", ", ", "; ", " ", "  ", "\t"])
def test_a_row_of_one_value_is_data_until_it_runs_on(channel, sep):
    # f(0) to f(20) are all 1 with only 1-yuan coins: a row of a table, no loop (a number and
    # a full stop, ``1. 1. 1.``, is a list number chanted, and needs no more than marks do)
    row = "With 1-yuan coins only, f(0) to f(20) are: " + sep.join(["1"] * 21) + ".\n\nNext."
    assert scan_text(row, channel) == []
    # written on and on, it is one
    hits = scan_text("The values: " + sep.join(["1"] * 120), channel)
    assert hits and hits[0].rule == "cycle"


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_table_of_values_set_in_spaces_is_data(channel):
    # a DP table's row of ways, all 1 with pennies alone, under its amounts; a zero matrix
    amounts = "a:    " + "".join(f"{a:3d}" for a in range(31))
    ways = "ways: " + "  1" * 31
    assert scan_text(f"Coin 1 only:\n{amounts}\n{ways}\n\nCoin 5 next.\n", channel) == []
    zeros = "\n".join(" ".join(["0"] * 12) for _ in range(12))
    assert scan_text(f"np.zeros((12, 12)) prints:\n{zeros}\n\nThen fill it.\n", channel) == []
    # a chant of one digit with spaces is still cut within 300 chars
    head = "The answer is "
    hits = scan_text(head + "1 " * 400, channel)
    assert hits and hits[0].rule == "cycle" and hits[0].fired_at - len(head) <= 300


@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_list_number_chanted_in_a_fence_is_cut_within_300_chars(channel):
    # SmolLM2's log of a batch job (make e2e): ``1. 1. 1. …`` in a fence, on and on
    head = "Here are the log lines:\n\n```\n"
    hits = scan_text(head + "1. " * 300, channel)
    assert hits and hits[0].rule == "cycle"
    assert hits[0].fired_at - len(head) <= 300


def test_thirty_copies_of_one_letter_and_48_of_one_ideograph():
    _fires_early(LEAD + "a" * 60, len(LEAD), 30, keep=1)
    _fires_early(LEAD + "好" * 48, len(LEAD), 30, keep=1)


@pytest.mark.parametrize(("unit", "copies"), [("生命中的", 14), ("again ", 12), ("ok", 20)])
def test_a_short_unit_repeated_between_two_checkpoints_is_cut(unit, copies):
    assert len(INSIDE_LEAD) > STRIDE and len(INSIDE_LEAD) + len(unit) * copies < 2 * STRIDE
    text = INSIDE_LEAD + unit * copies + AFTER_RUN
    for sizes in ((3, 5, 2), (1,), (64,)):
        hit = stream(text, "text", sizes=sizes)
        assert hit is not None and hit.rule == "cycle", (sizes, hit)
        # judged at the checkpoint after the run: one copy kept
        assert hit.fired_at <= 2 * STRIDE + 1, hit
        assert hit.prune_offset == len(INSIDE_LEAD) + len(unit), hit


# A run that starts after one checkpoint and stops before the next (a model's phrase stuck for
# a dozen copies inside a sentence, which then goes on): 130 chars of lead put it in a stride.
INSIDE_LEAD = (
    "The answer needs one short paragraph about the cache, so I will write it and then stop. "
    "First the cache itself, then what it is for.\n"
)


AFTER_RUN = (
    "；。这就是人工智能的一种工作的技巧，它可以让我们更好地看到自己的未来。\n\n"
    "Then the answer moves on to the next point, with new words in every sentence it writes. "
    "It explains the eviction policy, the sizes involved, and how a reader would tune them.\n"
)


@pytest.mark.parametrize(
    "inside",
    [
        "ha" * 9,  # nine copies of a short unit: fewer than the ten a loop needs
        "好的" * 8,
        "-" * 40 + "\n",  # a divider
        "        return value\n" * 2,  # indentation
        "a-b-c-d-e-f-g-h ",  # a pattern, not a repeated unit
    ],
)
def test_short_repetition_inside_a_stride_that_is_no_loop(inside):
    assert stream(INSIDE_LEAD + inside + AFTER_RUN, "text", sizes=(3, 5, 2)) is None


def test_a_fifty_char_chunk_ten_times_and_a_sentence_twenty_times():
    chunk = "Row check passed for the cached item, moving on. "
    assert len(chunk) == 49
    _fires_early(LEAD + chunk * 10, len(LEAD), 300, keep=len(chunk))
    sentence = "I will now verify the result. "
    _fires_early(LEAD + sentence * 20, len(LEAD), 300, keep=len(sentence))


def test_a_five_sentence_block_four_times():
    block = (
        "I am complete. The work is finished. I will exit now. Everything is done. "
        "I will stop here.\n"
    )
    hit = _fires_early(LEAD + block * 6, len(LEAD), 4 * len(block), keep=len(block))
    assert (LEAD + block * 6)[: hit.prune_offset].count("I am complete.") <= 1


def test_a_long_paragraph_is_cut_within_two_copies_after_the_third_starts():
    paragraph = (
        "The retry policy doubles the delay after every failed attempt, starting at half a "
        "second, and gives up after five attempts or thirty seconds, whichever comes first. "
        "A 429 answer with a Retry-After header overrides the computed delay.\n\n"
    )
    text = LEAD + paragraph * 6
    hit = stream(text, "reasoning", sizes=(4,))
    assert hit is not None
    assert hit.fired_at - len(LEAD) <= 2 * len(paragraph) + 2 * len(paragraph) + STRIDE
    assert hit.prune_offset == len(LEAD) + len(paragraph)


def test_near_empty_comment_lines_inside_a_fence():
    code = "```python\ndef retry(call):\n    delay = 0.5\n"
    hit = stream("Here is the helper:\n\n" + code + "#\n" * 200, "text")
    assert hit is not None and hit.rule == "cycle"
    assert hit.fired_at < len("Here is the helper:\n\n" + code) + 400


def test_one_flag_line_repeated_inside_a_fence():
    head = "Run it with:\n\n```bash\npython -m tool \\\n"
    flag = "  --enable-cache \\\n"
    hit = stream(head + flag * 120, "text")
    assert hit is not None and hit.rule == "cycle" and hit.period == len(flag)
    assert hit.fired_at - len(head) < 60 * len(flag)  # well inside a 700-token budget


@pytest.mark.parametrize(
    "line",
    [
        "    page_data = page_data.split('&#39;')  # remove the '#' delimiter\n",
        # SmolLM2's own, 31 chars once stripped (about five words)
        "    page_data = page_data.to_json()\n",
    ],
)
def test_one_long_statement_repeated_inside_a_fence_needs_no_extra_copies(line):
    head = "```python\ndef fetch(url):\n    page_data = get(url)\n"
    hit = stream(head + line * 40, "text")
    assert hit is not None and hit.rule == "cycle" and hit.period == len(line)
    # 1.5 times the copies the line needs outside a fence (give or take a checkpoint), not
    # three times them
    prose = stream("Notes:\n" + line * 40, "text")
    assert prose is not None
    outside = (prose.fired_at - len("Notes:\n")) / len(line)
    inside = (hit.fired_at - len(head)) / len(line)
    assert inside <= 1.5 * outside + STRIDE / len(line) < 3 * outside
    # the same statement written a few times is code, and five layers of a model are too
    assert scan_text(head + line * 4 + "    return page_data\n```\n", "text") == []
    layers = "    model.add(Dense(64, activation='relu', kernel_initializer='he_normal'))\n" * 5
    assert scan_text("```python\nmodel = Sequential()\n" + layers + "```\n", "text") == []
    # copies run together on one line are a statement, judged like any code in a fence
    run_on = "for (let k = 0; k < 8; k++) { sum += arr[k]; }" * 20
    assert scan_text("```\n" + run_on + "\n```\n", "text") == []
    # a short statement keeps the fence's full factor: "print it 20 times" is a request
    prints = '    print("Hello, World!")\n' * 20
    assert scan_text("```python\ndef greet():\n" + prints + "```\n", "text") == []


def test_copies_of_a_short_sentence_that_differ_in_whitespace():
    rng = random.Random(7)
    seps = [" ", "  ", "\n", "\n\n", " \n"]
    text = LEAD + "".join("I will check the config file." + rng.choice(seps) for _ in range(60))
    hit = stream(text, "reasoning")
    assert hit is not None
    assert hit.prune_offset <= len(LEAD) + len("I will check the config file.") + 16


def test_a_cjk_sentence_run_together_and_then_set_as_paragraphs_is_one_loop():
    # SmolLM2 on 什么是递归 (make e2e): three copies back to back, two after a blank line, then
    # blank lines between; the periodic run must not start again where the separator changes
    # (it did: cut at char 384 of the answer, 344 after the onset)
    sentence = "递归函数是一种简单的递归函数，它可以返回一个函数，用于返回一个函数。"
    lead = "递归是一种简单的递归函数，它是一种简单的递归函数，用于将一个函数返回值进行过滤。"
    text = lead + sentence * 3 + "\n\n" + sentence * 2
    text += "".join("\n\n" + sentence for _ in range(8))
    _fires_early(text, len(lead), within=5 * len(sentence) + 8, keep=len(sentence))
    # the English counterpart: spaced, then on lines of their own
    line = "The function returns a function that returns the function."
    english = LEAD + " ".join([line] * 3) + "".join("\n\n" + line for _ in range(12))
    _fires_early(english, len(LEAD), within=6 * (len(line) + 2), keep=len(line) + 1)


@pytest.mark.parametrize(
    "divider",
    ["-" * 80, "=" * 120, "─" * 100, "━" * 60, "+-" * 40, "╭" + "─" * 60 + "╮", "_" * 90],
)
def test_dividers_on_one_line_or_several(divider):
    one = "Results\n" + divider * 10 + "\nAll green.\n"
    several = "Results\n" + (divider + "\n") * 30 + "All green.\n"
    for text in (one, several):
        assert scan_text(text, "text") == []
        assert scan_text(text, "reasoning") == []


def test_repetitive_code_in_a_fence_is_held_to_a_stricter_threshold():
    block = CODE_BLOCK * 4  # four identical blocks, ~920 chars
    assert 600 < len(block) < 1200
    fenced = "Here are the four checks:\n```python\n" + block + "```\nAll four pass.\n"
    assert scan_text(fenced, "text") == []
    # outside a fence the same repetition is verbatim copies of >= 600 chars: a loop
    bare = "Here are the four checks:\n" + block + "All four pass.\n"
    assert scan_text(bare, "text")[0].rule == "cycle"


@pytest.mark.parametrize("channel", ["text", "reasoning"])
def test_a_table_of_zeros_in_a_fence_is_code(channel):
    # A model drafting code in its reasoning writes the rows an initialiser needs, as it does
    # in the answer; sixteen equal rows are code, not a loop (the reasoning used to cut them).
    row = "    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},\n"
    code = "Zero it first:\n```c\nint m[16][16] = {\n" + row * 16 + "};\n```\nThen fill it.\n"
    assert scan_text(code, channel) == []
    # the same rows as prose are a loop
    assert scan_text("Zero it first:\n" + row * 16 + "Then fill it.\n", channel) != []


@pytest.mark.parametrize("channel", ["text", "reasoning"])
def test_a_real_loop_inside_a_fence_is_still_caught(channel):
    head = "#include <llvm/MC/MCAsmInfo.h>\n#include <llvm/MC/MCInst.h>\n"
    pair = "    llvm::InitializeAllTargets();\n    llvm::InitializeAllAsmPrinters();\n"
    fenced = stream("```cpp\n" + head + pair * 40, channel)
    bare = stream("Includes:\n" + head + pair * 40, channel)
    assert fenced is not None and fenced.rule == "cycle" and fenced.period == len(pair)
    assert bare is not None and bare.period == len(pair)
    # a two-line block fires after 4 copies, inside a fence after codeFenceRepeatFactor (3) x 4
    fenced_copies = (fenced.fired_at - fenced.loop_start) / len(pair)
    bare_copies = (bare.fired_at - bare.loop_start) / len(pair)
    assert 3.5 <= bare_copies < 4 + 128 / len(pair) + 0.5  # judged at the next checkpoint
    assert fenced_copies >= 11.5


def _log_then_stuck(fenced: bool) -> tuple[str, int]:
    """A training log whose three numbers move on every line, then one line said again and
    again (a model that got stuck); and where the stuck lines begin."""
    rng = random.Random(1)
    lines = [
        f"epoch {step} loss {rng.uniform(0.5, 2.5):.4f} acc {rng.uniform(0.5, 0.99):.3f}"
        for step in range(1, 40)
    ]
    log = ("```\n" if fenced else "Training output:\n") + "\n".join(lines) + "\n"
    return log + "epoch 40 loss 0.5112 acc 0.941\n" * 30, len(log)


@pytest.mark.parametrize("fenced", [False, True])
@pytest.mark.parametrize("channel", ["text", "reasoning"])
def test_a_cycle_after_lines_whose_numbers_moved_on_begins_where_copies_became_the_same(
    fenced, channel
):
    # once numbers are folded every log line reads like the stuck one, but a cycle is copies
    # said as they were: the log's lines are no part of it, and stay
    text, stuck = _log_then_stuck(fenced)
    hits = scan_text(text, channel)
    assert hits and hits[0].rule == "cycle"
    assert hits[0].loop_start >= stuck
    assert hits[0].prune_offset == stuck + len("epoch 40 loss 0.5112 acc 0.941\n")
