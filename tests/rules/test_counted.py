"""Rule ``counted``: a template equal but for a counting number, far past any count the
request names."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprescue.config import DetectorConfig
from looprescue.corpus import random_deltas
from looprescue.detect import StreamDetector, scan_text
from looprescue.detect.asked import largest_count
from looprescue.detect.rules.counted import LONG_GAP, MAX_STRAY

CONFIG = DetectorConfig()
HEAD = "```python\ndef fib(n):\n    if n == 0:\n        return 0\n"


def ladder(last: int) -> str:
    """``elif n == 1: return 1`` … up to ``last``: the Fibonacci function a small model writes
    when it stops computing."""
    return HEAD + "".join(f"    elif n == {i}:\n        return {i}\n" for i in range(1, last + 1))


def stream(
    text: str,
    asked_up_to: int | None,
    seed: int = 0,
    config: DetectorConfig = CONFIG,
    channel: str = "text",
) -> tuple:
    """(hit, the furthest the watermark released)."""
    detector = StreamDetector(config, watch="both", asked_up_to=asked_up_to)
    released = 0
    for delta in random_deltas(text, random.Random(seed)):
        hit = detector.feed(channel, delta)
        if hit is not None:
            return hit, released
        released = max(released, detector.safe_offset(channel))
    return detector.flush(channel), released


def chunked_and_whole(text: str, seed: int, high: int) -> tuple:
    """(hit, the furthest the watermark released, the hit of the text fed whole), the text
    streamed in deltas of 1 to ``high`` chars; the watermark never takes back what it
    released."""
    detector = StreamDetector(CONFIG, watch="both", asked_up_to=0)
    hit, released = None, 0
    for delta in random_deltas(text, random.Random(seed), 1, high):
        hit = detector.feed("text", delta)
        if hit is not None:
            break
        safe = detector.safe_offset("text")
        assert safe >= released
        released = safe
    hit = hit or detector.flush("text")
    whole = StreamDetector(CONFIG, watch="both", asked_up_to=0)
    return hit, released, whole.feed("text", text) or whole.flush("text")


# --------------------------------------------------------------------------- loops


@pytest.mark.parametrize("seed", range(3))
def test_a_ladder_nobody_asked_for_is_cut_after_the_bound(seed: int) -> None:
    text = ladder(150)
    hit, released = stream(text, asked_up_to=0, seed=seed)
    assert hit is not None and hit.rule == "counted"
    # the copies are counted from ``if n == 0``'s number: its text to the next equals theirs
    assert text[hit.prune_offset :].startswith("    elif n == 40:\n")
    assert hit.repeats == 8  # a fifth of the 40 items past them
    assert released <= hit.prune_offset  # held from the first item past the bound


def test_rows_counted_on_are_cut_in_a_one_line_list_at_their_number() -> None:
    text = "Here are the ids: " + ", ".join(f"u{i}" for i in range(1, 300)) + "."
    hit, _ = stream(text, asked_up_to=0)
    assert hit is not None and hit.rule == "counted"
    assert text[: hit.prune_offset].endswith("u40, u")


def test_a_counter_shown_twice_in_a_copy_is_one_counter() -> None:
    text = "".join(f'<option value="{i}">{i}</option>\n' for i in range(1, 120))
    hit, _ = stream(text, asked_up_to=0)
    assert hit is not None and hit.rule == "counted"
    assert text[hit.prune_offset :].startswith('<option value="41">')


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 60), st.integers(40, 130))
def test_any_chunking_gives_the_same_cut_and_the_watermark_never_passes_it(
    seed: int, high: int, last: int
) -> None:
    text = ladder(last)
    hit, released, reference = chunked_and_whole(text, seed, high)
    assert (hit is None) == (reference is None) == (last < 47)  # items 0…47 are 48
    if hit is not None and reference is not None:
        assert (hit.prune_offset, hit.fired_at) == (reference.prune_offset, reference.fired_at)
        assert released <= hit.prune_offset


def function_copies(first: int, last: int, lang: str = "python") -> str:
    """One function written again and again, its name counted on, its body the same."""
    if lang == "python":
        body = (
            "(email: str) -> bool:\n"
            '    """Return True if the address is valid."""\n'
            "    if not isinstance(email, str):\n"
            "        return False\n"
            "    return bool(EMAIL_RE.match(email.strip()))\n\n\n"
        )
        return "".join(f"def validate_email_{i}{body}" for i in range(first, last + 1))
    body = (
        "(s string) bool {\n"
        "    // 校验邮箱地址是否合法\n"
        "    return emailRe.MatchString(strings.TrimSpace(s))\n"
        "}\n\n"
    )
    return "".join(f"func validEmail{i}{body}" for i in range(first, last + 1))


@pytest.mark.parametrize("lang", ["python", "go"])
@pytest.mark.parametrize("seed", range(2))
def test_a_long_template_nobody_asked_for_is_cut_after_its_first_copy(lang: str, seed: int) -> None:
    text = "Here is the validator:\n\n```\n" + function_copies(1, 12, lang)
    hit, released = stream(text, asked_up_to=0, seed=seed)
    assert hit is not None and hit.rule == "counted"
    # the first copy stays; the cut is where the second begins, found at the sixth
    assert text[hit.prune_offset :].startswith(function_copies(2, 2, lang))
    assert released <= hit.prune_offset


SUMMARY = (
    "{lead}\n\n"
    "- **Routine**: go to bed and get up at the same time every day;\n"
    "- **Room**: quiet, dark and cool;\n"
    "- **Evening**: no screens for an hour, no coffee after three;\n"
    "- **Daytime**: some sunlight and exercise, a nap of twenty minutes at most;\n\n"
    "Keep it up for two or three weeks and most people sleep better.\n\n"
)
LEADS = ["In short, the keys to better sleep are:", "To sum up, what helps most:",
         "总结一下，关键在于："]  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_a_section_said_again_under_a_new_number_is_cut_after_its_first_copy(seed: int) -> None:
    # its lead-in reworded in turn: the same section again
    rng = random.Random(seed)
    head = "## 3. Daytime habits\n\nGet outside in the morning.\n\n"
    sections = [
        f"## {n}. Summary\n\n" + SUMMARY.format(lead=rng.choice(LEADS)) for n in range(4, 12)
    ]
    text = head + "".join(sections)
    hit, _ = stream(text, asked_up_to=0, seed=seed)
    assert hit is not None and hit.rule == "counted"
    assert hit.prune_offset == len(head) + len(sections[0])  # the first summary is kept


def test_sections_that_share_their_frame_are_no_template() -> None:
    # an API's endpoints, each under its number, with the same headings and error table: the
    # lines they share are most of their lines, but not most of their text
    errors = (
        "**Errors**\n\n| code | meaning |\n|---|---|\n| 40100 | not signed in |\n"
        "| 42900 | too many requests |\n\n"
    )
    endpoints = [
        ("Register", "POST", "/api/v1/users", "phone, password, captcha"),
        ("Sign in", "POST", "/api/v1/sessions", "phone, password"),
        ("Profile", "GET", "/api/v1/users/me", "none"),
        ("Edit profile", "PATCH", "/api/v1/users/me", "nickname, avatar"),
        ("Change password", "PUT", "/api/v1/users/me/password", "old, new"),
        ("Sign out", "DELETE", "/api/v1/sessions/current", "none"),
        ("Close account", "DELETE", "/api/v1/users/me", "password"),
    ]
    text = "".join(
        f"## {n}. {name}\n\n- **Path**: `{path}`\n- **Method**: {method}\n"
        f"- **Parameters**: {params}\n\n" + errors
        for n, (name, method, path, params) in enumerate(endpoints, start=1)
    )
    assert stream(text, asked_up_to=0)[0] is None


CALL = (
    "<tool_call>\n"
    '{"name": "bash", "arguments": {"command": "sleep 30 && curl -s -o /dev/null -w '
    "'%{http_code}' https://staging.example.com/healthz\"}}\n"
    "</tool_call>\n\n"
)
REMARKS = {
    "en": ["still starting, retrying.", "still starting up, retrying.", "still starting, retry."],
    "zh": ["服务还在启动，重试。", "服务仍在启动，重试。", "服务还在启动，再试。"],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("seed", range(2))
def test_a_tool_call_retried_under_a_count_is_cut_after_the_first(lang: str, seed: int) -> None:
    # the same call again and again, its remark said a word apart: a long template (a remark
    # said wholly other ways each time is most of another copy's text: no copy)
    rng = random.Random(seed)
    label = "Health check attempt {}: " if lang == "en" else "第{}次健康检查："
    head = "Deployed. Polling the health endpoint.\n\n"
    blocks = [label.format(n) + rng.choice(REMARKS[lang]) + "\n\n" + CALL for n in range(1, 10)]
    text = head + "".join(blocks)
    hit, _ = stream(text, asked_up_to=0, seed=seed)
    assert hit is not None and hit.rule == "counted"
    assert hit.prune_offset == len(head) + len(blocks[0])
    assert hit.fired_at < len(head) + sum(map(len, blocks[:6]))  # at the sixth attempt


def test_blocks_that_come_back_in_turn_are_no_template() -> None:
    # a push, pull and legs split written out twice, word for word: each day another block
    days = {
        "Push": ["Bench press 4x8", "Overhead press 3x10", "Dips 3x12", "Lateral raises 3x15"],
        "Pull": ["Deadlift 3x5", "Pull-ups 4x8", "Barbell rows 3x10", "Face pulls 3x15"],
        "Legs": ["Squats 4x8", "Romanian deadlifts 3x10", "Lunges 3x12", "Calf raises 4x15"],
    }
    order = ["Push", "Pull", "Legs", "Push", "Pull", "Legs"]
    text = (
        "A six-day split:\n\n"
        + "".join(
            f"## Day {n}: {name}\n\n" + "".join(f"- {x}\n" for x in days[name]) + "\n"
            for n, name in enumerate(order, start=1)
        )
        + "## Day 7: Rest\n\nWalk, stretch, sleep.\n"
    )
    assert stream(text, asked_up_to=0)[0] is None


def test_a_long_template_is_bounded_by_the_count_asked() -> None:
    text = "```\n" + function_copies(1, 30)
    assert stream(text[: text.index("def validate_email_11")], asked_up_to=10)[0] is None
    hit, _ = stream(text, asked_up_to=10)
    assert hit is not None and text[hit.prune_offset :].startswith(function_copies(11, 11))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 80), st.integers(2, 12))
def test_a_long_template_gives_the_same_cut_in_any_chunking(
    seed: int, high: int, last: int
) -> None:
    text = "Sure.\n\n```python\n" + function_copies(1, last) + "```\n"
    hit, released, reference = chunked_and_whole(text, seed, high)
    # the count begins at the first copy's number: six copies make one and five past it
    assert (hit is None) == (reference is None) == (last < 6)
    if hit is not None and reference is not None:
        assert (hit.prune_offset, hit.fired_at) == (reference.prune_offset, reference.fired_at)
        assert released <= hit.prune_offset


# --------------------------------------------------------------------------- not loops


@pytest.mark.parametrize(
    ("template", "first"),
    [
        ("Step {}: Verify the result.\n", 5),
        ("Let me check once more (attempt {}).\n", 1),
        ("检查第{}项：符合。\n", 9),
        ("Try x = {}: 不对，继续下一个。\n", 8),
    ],
)
def test_a_template_counted_on_in_the_reasoning_is_cut_after_the_bound(
    template: str, first: int
) -> None:
    # the reasoning is bounded by the request as the answer is: a model counting one step on
    # and on is stuck there
    text = "Let me work through it.\n" + "".join(template.format(i) for i in range(first, 200))
    hit, released = stream(text, asked_up_to=25, channel="reasoning")
    assert hit is not None and hit.rule == "counted" and hit.channel == "reasoning"
    assert text[hit.prune_offset :].startswith(template.format(first + 40))
    assert released <= hit.prune_offset


_UNITS = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]  # fmt: skip
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_HAN = "一二三四五六七八九"


def in_words(n: int, joiner: str = "-") -> str:
    """1 to 99 in English words."""
    if n < 10:
        return _UNITS[n]
    if n < 20:
        return _TEENS[n - 10]
    return _TENS[n // 10] + (joiner + _UNITS[n % 10] if n % 10 else "")


def in_han(n: int) -> str:
    """1 to 99 in Chinese words."""
    if n < 10:
        return _HAN[n - 1]
    tens, units = divmod(n, 10)
    return (_HAN[tens - 1] if tens > 1 else "") + "十" + (_HAN[units - 1] if units else "")


@pytest.mark.parametrize(
    "template",
    [
        lambda i: f'    elif n == {i}:\n        return "{in_words(i)}"\n',
        lambda i: f"    case {i}: return '{in_words(i, ' ').title()}';\n",
        lambda i: f"{i}. 第{in_han(i)}项：同上，没有变化。\n",
    ],
)
def test_a_copy_that_says_its_counter_in_words_too_is_a_template(template) -> None:
    # ``return "fourteen"`` says the counter again: no copy says anything else new
    text = "```\n" + "".join(template(i) for i in range(1, 99))
    hit, released = stream(text, asked_up_to=10)
    assert hit is not None and hit.rule == "counted"
    # counted from the first copy: its text to the next says 1 and 2 as the later ones do
    assert text[hit.prune_offset :].startswith(template(41))
    assert released <= hit.prune_offset


def test_a_word_that_is_no_counter_keeps_copies_apart() -> None:
    # a word that names another number than the counter is something new in each copy
    rng = random.Random(5)
    text = "".join(f"{i}. {in_words(rng.randint(1, 99))} apples\n" for i in range(1, 99))
    assert stream(text, asked_up_to=10)[0] is None


def test_trials_in_the_reasoning_that_say_something_new_are_no_template() -> None:
    # each trial computes its own value: a search, however long, is no template
    text = "".join(f"Try x = {i}: {i * i + i}, not 25440.\n" for i in range(1, 200))
    assert stream(text, asked_up_to=0, channel="reasoning")[0] is None


def test_a_few_long_copies_and_long_sections_that_differ_are_no_template() -> None:
    # replicas unasked, as a compose file writes them, stay: three copies, then something else
    workers = "".join(
        f"  worker_{i}:\n    image: app:latest\n    command: celery -A app worker\n"
        f"    depends_on: [redis, postgres]\n    restart: unless-stopped\n"
        for i in range(1, 4)
    )
    assert stream("services:\n" + workers + "  redis:\n    image: redis:7\n", 0)[0] is None
    # numbered sections, each long and its own: nothing is held back for them
    rng = random.Random(2)
    words = ["cache", "index", "shard", "queue", "retry", "batch", "token", "route"]
    sections = "".join(
        f"### Step {i}\n\n" + " ".join(rng.choice(words) for _ in range(40)) + ".\n\n"
        for i in range(1, 12)
    )
    detector = StreamDetector(CONFIG, watch="both", asked_up_to=0)
    others = StreamDetector(DetectorConfig(ignore=["counted"]), watch="both", asked_up_to=0)
    for at in range(0, len(sections), 7):
        assert detector.feed("text", sections[at : at + 7]) is None
        others.feed("text", sections[at : at + 7])
        assert detector.safe_offset("text") == others.safe_offset("text")


def test_without_a_request_nothing_is_judged() -> None:
    # a session file on disk has no request to bound its lists: scan stays quiet
    text = ladder(150)
    assert stream(text, asked_up_to=None)[0] is None
    assert scan_text(text, channel="text") == []


def test_a_count_the_request_names_raises_the_bound() -> None:
    text = "\n".join(str(n) for n in range(1, 101)) + "\n\nDone."
    assert stream(text, asked_up_to=largest_count("Count to 100, one number a line."))[0] is None
    longer = "\n".join(str(n) for n in range(1, 160))
    hit, _ = stream(longer, asked_up_to=100)
    assert hit is not None and hit.rule == "counted"
    assert longer[hit.prune_offset :].startswith("101\n")


def test_items_that_change_in_more_than_their_number_are_a_list() -> None:
    rng = random.Random(3)
    names = ["".join(rng.choice("aeioubdklmnrst") for _ in range(7)).title() for _ in range(120)]
    text = "".join(f"{i}. {names[i]}\n" for i in range(1, 120))
    assert stream(text, asked_up_to=0)[0] is None


def test_a_log_whose_measurements_change_is_no_template() -> None:
    rng = random.Random(4)
    text = "".join(f"epoch {i} loss {rng.uniform(0, 1):.4f}\n" for i in range(1, 200))
    assert stream(text, asked_up_to=0)[0] is None


def test_a_stray_copy_goes_on_with_the_count() -> None:
    # a variant now and then (``"unknown"`` among ``"Unknown"``): the template comes back
    items = [f"    elif n == {i}:\n        return {i}\n" for i in range(1, 120)]
    items[30] = "    elif n == 31:\n        return 1346269\n"
    items[35] = "    elif n == 36:\n        return None\n"  # two in a row
    items[36] = "    elif n == 37:\n        return None\n"
    text = HEAD + "".join(items)
    hit, _ = stream(text, asked_up_to=0)
    assert hit is not None
    assert text[hit.prune_offset :].startswith("    elif n == 40:\n")


@pytest.mark.parametrize(
    ("item", "variants"),
    [
        ("- 第{}条：待补充\n", ("- 第{}条：待定\n", "- 第{}条：（待补充）\n")),
        ('        case {}: return "Unknown";\n', ('        case {}: return "unknown";\n',)),
    ],
)
@pytest.mark.parametrize("seed", range(3))
def test_a_template_that_strays_now_and_then_is_cut_after_the_bound(
    item: str, variants: tuple[str, ...], seed: int
) -> None:
    # one variant or two in a row, now and then, among copies of the template
    rng = random.Random(seed)
    lines, n = [], 13
    while n < 160:
        for _ in range(rng.randint(1, MAX_STRAY)) if rng.random() < 0.15 else ():
            lines.append(rng.choice(variants).format(n))
            n += 1
        lines.append(item.format(n))
        n += 1
    text = "".join(item.format(i) for i in range(1, 13)) + "".join(lines)
    hit, released = stream(text, asked_up_to=20, seed=seed)
    assert hit is not None and hit.rule == "counted"
    # counted from the first copy: the cut is at the 41st item, or the one after a stray there
    cut = text[hit.prune_offset :]
    assert cut.startswith(item.format(41)) or cut.startswith(item.format(42))
    assert released <= hit.prune_offset


@pytest.mark.parametrize(
    ("item", "drifted"),
    [
        ('Mantra: {}. "Mantra" - 范风风\n\n', 'Mantra: {}. "Mantra" - 范风飏\n\n'),
        ("Retry {}: apply the patch again.\n", "Retry {}: apply the patch again!\n"),
    ],
)
def test_a_template_that_changes_a_char_for_good_goes_on(item: str, drifted: str) -> None:
    # SmolLM2 (t=0.8, 30 idioms asked): a char changes at item 19 and stays changed
    text = "".join(item.format(i) for i in range(3, 19)) + "".join(
        drifted.format(i) for i in range(19, 70)
    )
    hit, released = stream(text, asked_up_to=30)
    assert hit is not None and hit.rule == "counted"
    assert text[hit.prune_offset :].startswith(drifted.format(43))  # 3 + 40 items kept
    assert released <= hit.prune_offset


def test_a_list_of_words_a_char_apart_is_a_list() -> None:
    # a Gray code of six places written in x and o: each code a char from the one before
    codes = ["".join("o" if (g >> k) & 1 else "x" for k in range(5, -1, -1)) for g in
             (n ^ (n >> 1) for n in range(64))]  # fmt: skip
    text = "".join(f"{i}. {code}\n" for i, code in enumerate(codes, start=1))
    assert stream(text, asked_up_to=0)[0] is None


def test_differing_copies_in_a_row_start_the_count_again() -> None:
    items = [f"    elif n == {i}:\n        return {i}\n" for i in range(1, 120)]
    for i in range(30, 30 + MAX_STRAY + 1):  # n = 31, 32, 33 return their real values
        items[i] = f"    elif n == {i + 1}:\n        return {1000 + i}\n"
    text = HEAD + "".join(items)
    hit, _ = stream(text, asked_up_to=0)
    assert hit is not None
    # 33's copy, the third to differ, sets the template anew; 34's and 35's stray from it, and
    # 36's sets the old one again: 40 items are kept from 36 on
    assert text[hit.prune_offset :].startswith("    elif n == 76:\n")


def test_the_bound_is_configurable_and_null_turns_it_off() -> None:
    text = ladder(150)
    off = DetectorConfig(countedMaxItems=None)
    assert stream(text, asked_up_to=0, config=off)[0] is None
    hit, _ = stream(text, asked_up_to=0, config=DetectorConfig(countedMaxItems=10))
    assert hit is not None and text[hit.prune_offset :].startswith("    elif n == 10:\n")


def test_scattered_numbers_keep_the_chains_bounded() -> None:
    # every number may start a chain; stale ones are swept out as the text goes on
    rng = random.Random(7)
    detector = StreamDetector(CONFIG, watch="both", asked_up_to=0)
    text = " ".join(str(rng.randint(0, 10**5)) for _ in range(40_000))
    (rule,) = [r for r in detector._channel("text")._rules if r.names() == ("counted",)]
    most = 0
    for at in range(0, len(text), 100):
        assert detector.feed("text", text[at : at + 100]) is None
        most = max(most, len(rule._chains))
    assert detector.flush("text") is None
    # a number alone waits LONG_GAP (2,400) chars: about 400 numbers of 6 chars, then a sweep
    assert most <= 2 * LONG_GAP // 5


@pytest.mark.parametrize(
    ("prompt", "count"),
    [
        ("Write a Python function that returns the nth Fibonacci number.", 0),
        ("Count to 100.", 100),
        ("Print the numbers 1 to 5000.", 5000),
        ("List fifty US states.", 50),
        ("写出三十个编号。", 30),
        ("把第1到第60号的说明写出来", 60),  # a number right against Chinese words
        ("在2024年发布了3个版本", 3),
        ("In 2024 we shipped 3 releases.", 3),  # a year is no count
        ("Upgrade to version 3.14.", 0),  # nor a version
    ],
)
def test_largest_count(prompt: str, count: int) -> None:
    assert largest_count(prompt) == count


def test_scan_text_bounds_a_template_by_the_request_it_is_given():
    # the same text: cut past what was asked when the human's messages come with it, left
    # alone without them (no request, nothing to bound the template by)
    text = "Sure.\n\n" + "".join(f"elif n == {n}: return {n}\n" for n in range(1, 80))
    [hit] = scan_text(text, "text", request=["Hi.", "Write the function for n up to 30."])
    assert hit.rule == "counted"
    assert "return 30\n" in text[: hit.prune_offset]
    assert "return 60\n" not in text[: hit.prune_offset]
    assert scan_text(text, "text") == []
