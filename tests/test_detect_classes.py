"""The loop classes real models produce, caught early, and the legitimate repetition left alone.

Every text here is written for these tests; the shapes follow what other loop detectors' own
suites exercise and what a 135M model produced (corpus/smollm2.jsonl). Each loop is checked for
how soon it fires (loop chars after its onset, with the 128-char checkpoint stride as slack) and
for how much of it the cut keeps.
"""

from __future__ import annotations

import random

import pytest
from tests.detect_helpers import stream

from looprescue.detect import scan_text

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


# -- short periods, many copies -------------------------------------------------------------


@pytest.mark.parametrize(
    "unit",
    ["<|endoftext|>\n", "**Note**\n", "Loading... ", "Repeat this ", "ABCDE", "好的", "🙂 yes "],
)
def test_a_short_unit_repeated_is_cut_within_about_300_chars(unit):
    hit = _fires_early(LEAD + unit * 60, len(LEAD), 300, keep=len(unit))
    assert hit.rule in ("cycle", "echo", "pool")


def test_thirty_copies_of_one_letter_and_48_of_one_ideograph():
    _fires_early(LEAD + "a" * 60, len(LEAD), 30, keep=1)
    _fires_early(LEAD + "好" * 48, len(LEAD), 30, keep=1)


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


# -- loops inside code fences ---------------------------------------------------------------


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


# -- degenerate tables and counted lists ----------------------------------------------------


@pytest.mark.parametrize("cells", ["|  |  |", "| TBD | TBD |", "| - | - |"])
def test_table_rows_that_differ_only_in_the_row_number(cells):
    head = "| # | owner | due |\n|---|---|---|\n| 1 | ops | Monday |\n"
    rows = "".join(f"| {n} {cells}\n" for n in range(2, 60))
    hit = stream("Plan:\n\n" + head + rows, "text")
    assert hit is not None and hit.rule == "counter"
    assert hit.loop_start >= len("Plan:\n\n" + head)


def test_day_lists_that_mix_a_counter_with_a_pool_of_words():
    rng = random.Random(3)
    days = "".join(f"Day {n}: {rng.choice(['Rest', 'Run', 'Stretch'])}\n" for n in range(1, 61))
    hit = stream("Your 60-day plan:\n\n" + days, "text")
    assert hit is not None and hit.rule == "pool"
    assert hit.prune_offset == len("Your 60-day plan:\n\n")  # none of the list is kept


def test_numbered_items_whose_content_is_gone():
    items = "1. Apple\n2. Pear\n3. Plum\n" + "".join(f"{n}. Banana\n" for n in range(4, 101))
    hit = stream(items, "text")
    assert hit is not None and hit.rule == "counter"
    assert items[hit.loop_start : hit.prune_offset] == "4. Banana\n"


def test_a_cjk_list_item_renumbered_is_cut_as_soon_as_a_cycle_would_be():
    # SmolLM2's continuation of 什么是光合作用 (make e2e): one item, its number counting on;
    # its 700-token budget ran out inside the eighth copy
    item = "你可以使用一个全属的编界；，这就是一种生命空氣。"
    head = "请接着再回原文里提到的一句话：\n\n1. 你可以在上面的回答中使用一个全属的编界；\n"
    text = head + "".join(f"{n}. {item}\n" for n in range(2, 8)) + "8. " + item[:-4]
    hit = stream(text, "text")
    # (renumbered sees the sentence said under a third number before counter's fourth copy)
    assert hit is not None and hit.rule in ("counter", "renumbered")
    assert text[hit.loop_start : hit.prune_offset] == f"2. {item}\n"  # one copy kept
    # the same item with words that change is a list
    items = ["光合作用", "呼吸作用", "蒸腾作用", "吸收作用", "运输作用", "储存作用", "分解作用"]
    listed = head + "".join(f"{n}. {w}：这就是一种生命活动。\n" for n, w in enumerate(items, 2))
    assert scan_text(listed, "text") == []


def test_rows_of_results_whose_result_never_changes():
    rows = "1 x 12 = 12\n2 x 12 = 24\n3 x 12 = 36\n" + "".join(
        f"{n} x 12 = 12\n" for n in range(4, 21)
    )
    hit = stream(rows + "\nHere is the table.\n", "text")
    assert hit is not None and hit.rule == "counter"
    assert hit.prune_offset <= len("1 x 12 = 12\n")  # the rows fold alike from the first
    # the same table with its results right is what was asked for
    table = "".join(f"{n} x 12 = {12 * n}\n" for n in range(1, 41))
    assert scan_text(table + "\nHere is the table.\n", "text") == []


def test_numbered_step_blocks_reemitted_with_only_the_number_changed():
    block = (
        "{n}. **Install Python**: download the installer from the official site and run it. "
        "Tick the box that adds Python to PATH, then finish the wizard.\n\n"
    )
    text = "Steps:\n\n" + "".join(block.format(n=n) for n in range(1, 30))
    hit = stream(text, "text")
    assert hit is not None and hit.rule in ("counter", "renumbered")
    assert hit.loop_start == len("Steps:\n\n")
    assert text[hit.loop_start : hit.prune_offset] == block.format(n=1)


# -- token echo -----------------------------------------------------------------------------


def test_the_chat_echoed_after_an_end_of_turn_token():
    answer = "The capital of France is Paris."
    echo = "".join(
        f"<|im_end|>\n<|im_start|>user\nAnd of Spain?<|im_end|>\n<|im_start|>assistant{n}\n"
        for n in range(1, 20)
    )
    hit = stream(answer + echo, "text")
    assert hit is not None and hit.rule == "echo"
    assert hit.prune_offset == len(answer)  # the answer stays, nothing after its end of turn


def test_special_tokens_quoted_as_documentation_are_not_an_echo():
    doc = (
        "ChatML wraps every turn: a turn opens with `<|im_start|>` and a role and closes with "
        "`<|im_end|>`; Llama 2 closes with `</s>` instead, and Gemma uses `<end_of_turn>`.\n\n"
        "```\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n```\n"
    )
    assert scan_text(doc, "text") == []


# -- near-copies ----------------------------------------------------------------------------


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


def test_copies_that_differ_in_a_word_rotate_as_a_pool():
    rng = random.Random(9)
    forms = ["Let me check the file.", "Let me check the code.", "Let me check the test."]
    text = LEAD + "\n".join(rng.choice(forms) for _ in range(60))
    hit = stream(text, "reasoning")
    assert hit is not None and hit.rule in ("pool", "cycle")
    # phrases this long are not held back as they come: a pool of them is cut at its first
    # repeat, keeping each phrase's first appearance (as a cycle keeps its first copy)
    kept = text[len(LEAD) : hit.prune_offset]
    assert kept.count("Let me check") <= 2 * len(forms)


# -- legitimate repetition ------------------------------------------------------------------


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


def _fenced(lang: str, body: str) -> str:
    return f"Here you go:\n\n```{lang}\n{body}```\n"


COUNTER_TEMPLATES = {
    "css classes": "".join(
        f".row-{n} {{\n  display: flex;\n  gap: {n * 2}px;\n}}\n" for n in range(1, 51)
    ),
    "json objects": "[\n"
    + "".join(f'  {{"id": {n}, "name": "user{n}", "active": true}},\n' for n in range(1, 51))
    + "]\n",
    "log lines": "".join(
        f"2026-12-01 10:{n % 60:02d}:00 INFO processing record {n} done\n" for n in range(1, 61)
    ),
    "function stubs": "".join(
        f"def handler{n}(event):\n    return dispatch(event, {n})\n\n" for n in range(1, 41)
    ),
    "sql seed rows": "".join(
        f"INSERT INTO users (id, name) VALUES ({n}, 'user{n}');\n" for n in range(1, 61)
    ),
    "numbered bullets": "".join(
        f"- step {n}: run the same command and check the output\n" for n in range(1, 41)
    ),
    "enumerated lines": "".join(
        f"Step {n}: examine part {n} of the input and record it.\n" for n in range(1, 61)
    ),
}


@pytest.mark.parametrize("name", sorted(COUNTER_TEMPLATES))
def test_counter_templates_in_code_and_data_are_what_was_asked_for(name):
    body = COUNTER_TEMPLATES[name]
    for text in (_fenced("text", body), "Here you go:\n\n" + body):
        assert scan_text(text, "text") == [], name
        assert stream(text, "text", sizes=(4, 1, 7)) is None, name


def test_a_table_that_keeps_drawing_rows_from_a_handful():
    rng = random.Random(4)
    rows = ["| Monday | Monday | Monday |", "| Saturday | Saturday | Monday |", "| Sunday | Rest |"]
    head = "| Day | Week | Weekend |\n|---|---|---|\n| Tuesday | Wednesday | Friday |\n"
    body = "".join(rng.choice(rows) + "\n" for _ in range(60))
    hit = stream("Here is a table:\n\n" + head + body, "text")
    assert hit is not None and hit.rule == "rows"
    kept = ("Here is a table:\n\n" + head + body)[: hit.prune_offset]
    # cut at the streak of repeated rows: the first rows of the loop stay, hardly more
    assert len(kept.splitlines()) - 5 <= len(rows) + 2


def test_a_real_table_with_distinct_rows_streams_untouched():
    names = ["lock", "header", "frames", "tail", "backup", "undo", "marker", "title", "steps"]
    table = "| part | reads | writes |\n|---|---|---|\n" + "".join(
        f"| {name} {kind} | yes | no |\n" for kind in ("file", "cache", "log") for name in names
    )
    assert scan_text(table, "text") == []


def test_list_items_whose_numbers_jump_about_are_not_an_enumeration():
    rng = random.Random(5)
    items = "".join(
        f"   - **PEP {rng.randint(10, 60)} (Python {rng.randint(2, 4)}, 2021)**:\n"
        for _ in range(60)
    )
    hit = stream("4. **Standard Library**:\n" + items, "text")
    assert hit is not None and hit.rule == "counter"


def test_a_numbered_list_of_nothing_but_numbers():
    items = "".join(f"{n}. {n}. 1. {n}\n" for n in range(1, 70))
    hit = stream("1. 成语：\n" + items, "text")
    assert hit is not None and hit.rule == "counter"
