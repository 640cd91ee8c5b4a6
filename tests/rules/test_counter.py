"""Rule counter: copies identical but for their numbers, and the counted lists a user asks for."""

from __future__ import annotations

import random

import pytest
from tests.detect_helpers import PREAMBLE, stream
from tests.support import loopgen

from looprescue.detect import scan_text


@pytest.mark.parametrize("cells", ["|  |  |", "| TBD | TBD |", "| - | - |"])
def test_table_rows_that_differ_only_in_the_row_number(cells):
    head = "| # | owner | due |\n|---|---|---|\n| 1 | ops | Monday |\n"
    rows = "".join(f"| {n} {cells}\n" for n in range(2, 60))
    hit = stream("Plan:\n\n" + head + rows, "text")
    assert hit is not None and hit.rule == "counter"
    assert hit.loop_start >= len("Plan:\n\n" + head)


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


def test_list_items_whose_numbers_jump_about_are_not_an_enumeration():
    rng = random.Random(5)
    items = "".join(
        f"   - **PEP {rng.randint(10, 60)} (Python {rng.randint(2, 4)}, 2021)**:\n"
        for _ in range(60)
    )
    hit = stream("4. **Standard Library**:\n" + items, "text")
    assert hit is not None and hit.rule == "counter"


@pytest.mark.parametrize(
    "line",
    [
        "Downloading layer {big}: {pct}% complete\n",
        "GPU 0: utilisation {pct}%, memory {small} GB\n",
        "Queue depth is {small} jobs\n",
        "[10:{minute:02d}] still waiting for the deployment, pods ready {small}/3\n",
        "下载进度：{pct}%，剩余约 {small} 分钟\n",
    ],
)
def test_a_log_that_reads_a_value_again_and_again_is_not_a_loop(line):
    # A one-line template whose number rises and falls is a log's line, in any chunking.
    rng = random.Random(11)
    log = "".join(
        line.format(
            big=rng.randint(1000, 9999),
            pct=rng.randint(1, 99),
            small=rng.randint(0, 12),
            minute=(7 * k + rng.randint(0, 2)) % 60,
        )
        for k in range(40)
    )
    text = "Here is the output:\n" + log + "\nAll layers are in.\n"
    for channel in ("text", "reasoning"):
        assert scan_text(text, channel) == [], channel
        assert stream(text, channel, sizes=(3, 7, 2)) is None, channel


def test_a_queue_that_drains_in_a_log_is_not_a_loop():
    # a reading that stays a while, then falls by uneven steps, for a dozen lines and more:
    # it never rises in the last twelve, yet it is read, not counted (the matrix's readings)
    depths = [9, 4, 7, 8, 8, 6, 9, 4, 5, 1, 2, 2, 8, 0, 7, 7, 7, 6, 5, 5, 2, 2, 1, 1, 0, 3]
    log = "".join(
        f"worker-3 queue depth is {d} messages, all consumers are healthy\n" for d in depths
    )
    text = "The worker log shows:\n" + log + "\nSo the queue drained.\n"
    for channel in ("text", "reasoning"):
        assert scan_text(text, channel) == [], channel
        assert stream(text, channel, sizes=(5,)) is None, channel


def test_a_line_whose_number_drifts_on_is_still_a_loop():
    # a model stuck on one line while its number creeps up: no index (its steps vary) and no
    # reading (it never falls back)
    rng = random.Random(4)
    n, lines = 3, []
    for _ in range(60):
        n += rng.randint(1, 3)
        lines.append(f"Now at step {n} of the plan, and nothing else has changed.\n")
    hit = stream("Progress:\n" + "".join(lines), "text")
    assert hit is not None and hit.rule == "counter"


def test_an_answer_key_whose_answers_repeat_a_few_times_in_a_row():
    # Labels counting up line by line, over answers that fall into a run by chance: a block
    # of three lines "restated" with new numbers, but each line numbered, so a list
    answers = ["true", "false", "true"] + ["true", "false", "false"] * 6 + ["false", "true"]
    key = "".join(f"Statement {n}: {a}.\n" for n, a in enumerate(answers, 1))
    for channel in ("text", "reasoning"):
        assert scan_text("Going through each statement.\n" + key, channel) == [], channel


def test_a_countdown_found_two_lines_a_copy_is_still_an_enumeration():
    # The matrix found a countdown whose run the periodic rule followed at two lines a copy,
    # then judged a block restated with new numbers (the one-line index check never ran).
    case = loopgen.make("countdown", 111, "en", "space", "reasoning")
    assert scan_text(case.text, "reasoning") == []
    assert stream(case.text, "reasoning", sizes=(1,)) is None


def test_a_numbered_list_of_nothing_but_numbers():
    items = "".join(f"{n}. {n}. 1. {n}\n" for n in range(1, 70))
    hit = stream("1. 成语：\n" + items, "text")
    assert hit is not None and hit.rule == "counter"


def test_a_list_of_short_answers_that_repeat_is_not_a_loop():
    # answers to a numbered checklist: a short word may repeat item after item
    for word in ("Yes", "是", "N/A", "Done."):
        answers = "".join(f"{n}. {word}\n" for n in range(1, 9))
        text = "Checklist answers:\n" + answers + "9. No\n\nAll checks done."
        assert scan_text(text, "text") == [], word


def test_a_chinese_enumeration_is_words_not_a_chant_of_numbers():
    # four CJK chars say as much as eight letters: 用户编号 N counted up is an enumeration a
    # user asks for, where t1t2t3 is a chant
    text = "下面是编号列表。\n\n" + "".join(f"{i}. 用户编号 {i}\n" for i in range(1, 51))
    assert scan_text(text, "text") == []
    assert scan_text(text, "reasoning") == []


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
    # and so is a countdown, in either language
    down = "".join(f"T-minus {n} seconds and holding steady.\n" for n in range(40, 0, -1))
    zh = "".join(f"倒计时{n}秒，请做好准备。\n" for n in range(40, 0, -1))
    for text in (down, zh):
        assert scan_text(PREAMBLE + text, "text") == []
        assert scan_text(PREAMBLE + text, "reasoning") == []


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


@pytest.mark.parametrize(
    ("heading", "line"),
    [
        ("### {n} times table\n", "{n} × {k} = {v}\n"),
        ("**{n}的乘法表**\n", "{n}×{k}={v}，"),
    ],
)
def test_times_tables_are_values_worked_out_anew_not_a_counter(heading, line):
    # every line of each table says a new product: a block of values, not a block restated
    tables = "".join(
        heading.format(n=n) + "".join(line.format(n=n, k=k, v=n * k) for k in range(1, 13)) + "\n\n"
        for n in range(1, 13)
    )
    assert scan_text(PREAMBLE + tables, "text") == []


def test_a_block_that_says_its_counter_on_every_line_is_still_a_loop():
    # the counter moves by one step wherever the block says it: nothing is worked out
    block = "Attempt {n}: connecting to the server.\nAttempt {n} failed, retrying attempt {n}.\n\n"
    text = PREAMBLE + "".join(block.format(n=n) for n in range(3, 40))
    hits = scan_text(text, "text")
    assert hits and hits[0].rule == "counter"


STEP_WITH_FENCE = {
    "en": (
        "### Step {n}: Install the dependencies\n\nFrom the project folder, install them:\n\n"
        "```bash\npip install -r requirements.txt\n```\n\n"
    ),
    "zh": (
        "### 步骤 {n}：安装依赖\n\n进入项目目录后，安装所需的依赖包：\n\n"
        "```bash\npip install -r requirements.txt\n```\n\n"
    ),
}


@pytest.mark.parametrize("lang", sorted(STEP_WITH_FENCE))
def test_a_step_block_with_a_fence_restated_under_new_headings_is_a_counter_loop(lang):
    # The step before the loop ends in a fence as each copy does, so the copies are found from
    # a closing fence line: a copy that opens and closes a fence is markdown, not code, and
    # needs no more copies than prose.
    block = STEP_WITH_FENCE[lang]
    before = "### Step 3: Create a virtual environment\n\n```bash\npython -m venv .venv\n```\n\n"
    text = PREAMBLE + before + "".join(block.format(n=n) for n in range(4, 30))
    for sizes in ((4,), (1, 7, 3)):
        hit = stream(text, "text", sizes=sizes)
        assert hit is not None and hit.rule == "counter", (lang, sizes)
        assert hit.prune_offset < len(PREAMBLE + before) + 2 * len(block), (lang, sizes)
    # the same block once under each number of a short list a user asked for stays
    asked = PREAMBLE + before + "".join(block.format(n=n) for n in range(4, 7))
    assert scan_text(asked, "text") == []
