"""Rule ``overrun``: a numbered list counted on past the range the request asked for; and the
ranges a request asks for."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprescue.config import load_config
from looprescue.corpus import random_deltas
from looprescue.detect import StreamDetector
from looprescue.detect.asked import asked_ranges, asked_sections
from looprescue.detect.rules.overrun import overrun_items

CONFIG = load_config(None, {})


def stream(
    text: str,
    asked: tuple[tuple[int, int], ...],
    seed: int = 0,
    past: int = -1,
    channel: str = "text",
) -> tuple:
    """(hit, the most chars from ``past`` on that the watermark ever released)."""
    detector = StreamDetector(CONFIG, watch="both", asked=asked)
    leaked = 0
    for delta in random_deltas(text, random.Random(seed)):
        hit = detector.feed(channel, delta)
        if hit is not None:
            return hit, leaked
        if past >= 0:
            leaked = max(leaked, detector.safe_offset(channel) - past)
    return detector.flush(channel), leaked


COUNT_TO = ", ".join(str(n) for n in range(1, 121))  # asked for 1..50


def stubs(count: int) -> str:
    body = "    def inner_func(x):\n        return x + 1\n    return inner_func\n"
    return "```python\n" + "".join(f"def task_{n}(func):\n{body}\n" for n in range(1, count + 1))


# --------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("seed", range(3))
def test_a_count_past_the_asked_end_is_cut_where_it_passes_it(seed: int) -> None:
    hit, leaked = stream(COUNT_TO, ((1, 50),), seed, past=COUNT_TO.index("51"))
    assert hit is not None and hit.rule == "overrun"
    assert COUNT_TO[: hit.prune_offset].endswith("49, 50, ")
    assert hit.repeats == overrun_items(1, 50)  # 10 numbers past 50
    assert leaked <= 0  # held from 51 on until it was sure


@pytest.mark.parametrize("seed", range(3))
def test_stubs_past_the_asked_last_one_are_cut_at_its_line(seed: int) -> None:
    text = stubs(40)
    hit, leaked = stream(text, ((1, 10),), seed, past=text.index("def task_11"))
    assert hit is not None and hit.rule == "overrun"
    assert text[hit.prune_offset :].startswith("def task_11(func):")
    assert text[: hit.prune_offset].endswith("return inner_func\n\n")
    assert leaked <= 0  # the line was held from its start: it could be the next item


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40))
def test_any_chunking_gives_the_same_cut_and_a_watermark_that_never_moves_back(
    seed: int, high: int
) -> None:
    text = stubs(30)
    detector = StreamDetector(CONFIG, watch="both", asked=((1, 10),))
    hit = None
    released = 0
    for delta in random_deltas(text, random.Random(seed), 1, high):
        hit = detector.feed("text", delta)
        if hit is not None:
            break
        safe = detector.safe_offset("text")
        assert safe >= released  # the watermark never takes back what it released
        released = safe
    hit = hit or detector.flush("text")
    whole = StreamDetector(CONFIG, watch="both", asked=((1, 10),))
    reference = whole.feed("text", text) or whole.flush("text")
    assert hit is not None and reference is not None
    assert (hit.prune_offset, hit.fired_at) == (reference.prune_offset, reference.fired_at)


def test_a_list_that_stops_at_the_asked_end_passes() -> None:
    text = "\n".join(f"{n}. Item {n}: pending" for n in range(1, 51)) + "\n\nThat is all 50 items."
    assert stream(text, ((1, 50),))[0] is None


def test_a_few_items_more_than_asked_pass() -> None:
    text = stubs(14)  # four past task_10: the model overshot, it did not loop
    assert stream(text, ((1, 10),))[0] is None


def test_without_a_range_a_long_count_passes() -> None:
    # the counter templates a user asks for: the rule says nothing without the request
    assert stream(COUNT_TO, ())[0] is None


def test_numbers_out_of_order_make_no_list() -> None:
    rng = random.Random(3)
    numbers = list(range(1, 121))
    rng.shuffle(numbers)
    text = ", ".join(map(str, numbers))
    assert stream(text, ((1, 50),))[0] is None


def test_a_list_that_paused_too_long_starts_again() -> None:
    words = [
        "note",
        "list",
        "pause",
        "model",
        "count",
        "stop",
        "later",
        "again",
        "after",
        "before",
        "while",
        "since",
    ]
    rng = random.Random(5)
    gap = " ".join(rng.choice(words) for _ in range(160)) + "."  # more than ITEM_GAP chars
    text = ", ".join(map(str, range(1, 50))) + ". " + gap + ", ".join(map(str, range(50, 90)))
    assert stream(text, ((1, 50),))[0] is None


TIPS = "Here are five tips:\n\n" + "".join(
    f"{n}. {tip}.\n"
    for n, tip in enumerate(
        (
            "Keep one wake-up time",
            "Stop caffeine after noon",
            "Dim the lights at nine",
            "Keep the bedroom cool",
            "Write tomorrow's list before bed",
        ),
        1,
    )
)
ROUTINE = "".join(
    f"{n}. {step}, slowly.\n"
    for n, step in enumerate(
        (
            "Close the laptop",
            "Tidy the desk",
            "Pack tomorrow's bag",
            "Make tea",
            "Shower",
            "Stretch",
            "Read a chapter",
            "Write three lines",
            "Set the alarm",
            "Open the window",
            "Breathe",
            "Lights out",
        ),
        1,
    )
)


@pytest.mark.parametrize(
    "between",
    [
        "\nAnd an evening routine in twelve steps:\n\n",
        "\n### Evening routine\n\n",
        "\nWhy a routine helps: the body learns the order of the evening and winds down on "
        "cue. Light matters most, since a dim room tells the brain that night has come. Food "
        "and drink play their part too, and a late coffee can undo an hour of good habits. "
        "Screens are harder: a phone in bed keeps the mind busy long after the lights go out. "
        "None of this has to be strict, and a missed evening changes little. What counts is "
        "the pattern over weeks, which the steps below make easy to keep without much "
        "thought, even on the busy days when sleep is the first thing to give way.\n\n",
    ],
    ids=["line", "heading", "prose"],
)
def test_a_new_list_after_the_asked_one_is_another_list(between: str) -> None:
    # five tips asked and given, then a twelve-step routine: its 6 to 12 follow no tip
    hit, _ = stream(TIPS + between + ROUTINE, ((1, 5),))
    assert hit is None


STEPS = ("Rinse", "Chop", "Heat the pan", "Fry", "Stir", "Season", "Simmer", "Taste", "Plate")
FOODS = ("rice", "leeks", "beans", "tofu", "noodles", "squash", "lentils", "greens")


def recipes(count: int, heading: str, steps: int = 8) -> str:
    """``count`` recipes, each under its numbered heading, with its numbered steps."""
    rng = random.Random(count)
    return "".join(
        heading.format(n)
        + "".join(
            f"{i}. {rng.choice(STEPS)} the {rng.choice(FOODS)}.\n" for i in range(1, steps + 1)
        )
        + "\n"
        for n in range(1, count + 1)
    )


@pytest.mark.parametrize("heading", ["## Recipe {}\n\n", "**Recipe {}: one pot**\n\n"])
def test_the_steps_under_each_asked_section_are_not_the_asked_list(heading: str) -> None:
    # five recipes asked: eight steps under each count the steps, not the recipes
    hit, _ = stream(recipes(5, heading), ((1, 5),))
    assert hit is None
    # twenty recipes when five were asked are cut at the sixth heading
    text = recipes(20, heading, steps=2)
    hit, _ = stream(text, ((1, 5),))
    assert hit is not None and hit.rule == "overrun"
    assert text[hit.prune_offset :].startswith(heading.format(6))


def dishes(count: int, indent: str, steps: int = 12) -> str:
    """``count`` numbered dishes, each with its own numbered steps under it."""
    rng = random.Random(count)
    return "".join(
        f"{n}. **Dish {n}**\n"
        + "".join(
            f"{indent}{i}. {rng.choice(STEPS)} the {rng.choice(FOODS)}.\n"
            for i in range(1, steps + 1)
        )
        for n in range(1, count + 1)
    )


@pytest.mark.parametrize("indent", ["   ", "\t", ""], ids=["spaces", "tab", "none"])
def test_the_steps_of_an_asked_item_are_its_own_list(indent: str) -> None:
    # five dishes asked: twelve steps under the first are that dish's, not dishes 6 to 12
    hit, _ = stream(dishes(5, indent), ((1, 5),))
    assert hit is None


def test_items_past_the_asked_end_with_steps_under_each_are_cut() -> None:
    text = dishes(20, "   ", steps=2)
    hit, _ = stream(text, ((1, 5),))
    assert hit is not None and hit.rule == "overrun"
    assert text[hit.prune_offset :].startswith("6. **Dish 6**")


def test_a_list_whose_items_say_its_first_number_still_counts_on() -> None:
    # ``return 1`` inside a stub opens no list: the stubs past task_10 are still cut
    body = "    return 1\n"
    text = "```python\n" + "".join(f"def task_{n}():\n{body}\n" for n in range(1, 40))
    hit, _ = stream(text, ((1, 10),))
    assert hit is not None and hit.rule == "overrun"
    assert text[hit.prune_offset :].startswith("def task_11")
    # nor does an item that begins with it, once the list is past the asked end
    items = "".join(f"{n}. 1 more item\n" for n in range(1, 40))
    hit, _ = stream(items, ((1, 10),))
    assert hit is not None and items[hit.prune_offset :].startswith("11. ")


LADDERS = {
    # the first branch says ``if``, the next ones ``elif`` / ``else if``: one list
    "python": ("    if n == {}:\n", "    elif n == {}:\n", '        return "{}"\n'),
    "c": ("    if (n == {}) {{\n", "    }} else if (n == {}) {{\n", '        return "{}";\n'),
    "ruby": ("  if n == {}\n", "  elsif n == {}\n", '    "{}"\n'),
}


def ladder(style: str, last: int, head: str = "") -> str:
    """A conditional ladder of branches 1 to ``last``: each of the twelve months has a name,
    the ones past them say the last name again."""
    first, then, body = LADDERS[style]
    names = [f"month {n}" for n in range(1, 13)]
    branches = (
        (first if n == 1 else then).format(n) + body.format(names[min(n, 12) - 1])
        for n in range(1, last + 1)
    )
    return "```\n" + head + "".join(branches)


@pytest.mark.parametrize("style", sorted(LADDERS))
def test_a_conditional_ladder_past_the_asked_range_is_cut(style: str) -> None:
    # a function asked for 1 to 12 whose branches go on past 12
    text = ladder(style, 40)
    hit, _ = stream(text, ((1, 12),))
    assert hit is not None and hit.rule == "overrun"
    assert text[hit.prune_offset :].startswith(LADDERS[style][1].format(13))
    # one that stops at 12 is the answer
    assert stream(ladder(style, 12), ((1, 12),))[0] is None


def test_a_range_named_before_a_list_is_no_item_it_nests_in() -> None:
    # ``1-12`` in the docstring is a range, not the first item of a list the ladder is inside
    text = ladder("python", 40, head='def month(n):\n    """Map 1-12 to a month."""\n')
    hit, _ = stream(text, ((1, 12),))
    assert hit is not None and text[hit.prune_offset :].startswith("    elif n == 13:")


def test_a_list_past_a_count_asked_in_words_is_cut_after_it() -> None:
    text = "Here they are:\n\n" + "".join(f"{i}. user id {i}\n" for i in range(1, 400))
    detector = StreamDetector(CONFIG, watch="both", asked=asked_ranges("Give me ten user ids."))
    hit = detector.feed("text", text) or detector.flush("text")
    assert hit is not None and hit.rule == "overrun"
    assert text[: hit.prune_offset].endswith("10. user id 10\n")


ZH_DIGITS = "一二三四五六七八九"


def zh(n: int) -> str:
    """``n`` (1 to 99) in Chinese words: 4 四, 11 十一, 20 二十, 45 四十五."""
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else ZH_DIGITS[tens - 1] + "十")
    return head + (ZH_DIGITS[ones - 1] if ones else "")


def days(count: int, heading: str, stops: int = 3, words: bool = False) -> str:
    """A trip plan of ``count`` days, each under its heading (numbered in Chinese words with
    ``words``), with its bulleted stops."""
    rng = random.Random(count)
    places = ("the old town", "the lake", "a tea farm", "the museum", "the night market")
    return "Here is the plan.\n\n" + "".join(
        heading.format(zh(n) if words else n)
        + "".join(f"- Visit {rng.choice(places)}.\n" for _ in range(stops))
        + "\n"
        for n in range(1, count + 1)
    )


def sectioned(text: str, prompt: str, seed: int = 0) -> object:
    """The hit on ``text`` streamed in random deltas, told what ``prompt`` asks for."""
    detector = StreamDetector(
        CONFIG, watch="both", asked=asked_ranges(prompt), sections=asked_sections(prompt)
    )
    for delta in random_deltas(text, random.Random(seed)):
        hit = detector.feed("text", delta)
        if hit is not None:
            return hit
    return detector.flush("text")


@pytest.mark.parametrize(
    ("prompt", "heading", "words"),
    [
        ("Plan a 3-day trip to Hangzhou.", "## Day {}\n\n", False),
        ("Plan three days in Hangzhou for me.", "**Day {}**\n", False),
        ("帮我规划一个3天的杭州旅游行程。", "### 第{}天\n\n", False),
        ("给我写一个三章的故事大纲。", "## 第{}章\n\n", False),
        ("帮我安排一个杭州三天的旅游行程。", "**第{}天：城市漫步**\n", True),
    ],
)
def test_sections_run_far_past_a_small_count_are_cut_after_it(
    prompt: str, heading: str, words: bool
) -> None:
    # three days asked, a day after day written until the budget runs out
    text = days(46, heading, words=words)
    fourth = heading.format(zh(4) if words else 4)
    for seed in range(3):
        hit = sectioned(text, prompt, seed)
        assert hit is not None and hit.rule == "overrun"
        assert text[hit.prune_offset :].startswith(fourth)
    # what was asked, and a few days more, is an answer
    assert sectioned(days(3, heading, words=words), prompt) is None
    assert sectioned(days(7, heading, words=words), prompt) is None


def test_a_list_numbered_in_chinese_words_past_its_range_is_cut() -> None:
    steps = "".join(f"第{zh(n)}步：检查配置文件。\n" for n in range(1, 40))
    text = "步骤如下：\n" + steps
    hit = sectioned(text, "请写出10个步骤。")
    assert hit is not None and hit.rule == "overrun"
    assert text[hit.prune_offset :].startswith("第十一步")


@pytest.mark.parametrize(
    ("prompt", "text"),
    [
        # a small count bounds no plain list: six tips for three is no loop
        ("Give me 3 tips for sleep.", "".join(f"{n}. Tip number {n}.\n" for n in range(1, 13))),
        # nor headings that name something else than what was counted
        ("Make me a 3-week study plan.", days(21, "### Day {}\n")),
        ("Plan a 3-day trip to Rome.", days(12, "## {}. A stop in Rome\n")),
        # nor a count the sentence describes
        ("I have 3 days off. Any ideas?", days(12, "## Day {}\n")),
        # nor a word that is part of a compound
        ("Give me 3 step-by-step guides.", days(12, "### Step {}\n")),
    ],
    ids=["plain-list", "other-word", "unnamed-headings", "described", "compound"],
)
def test_a_small_count_bounds_only_the_headings_it_names(prompt: str, text: str) -> None:
    assert sectioned(text, prompt) is None


def test_the_days_of_each_asked_week_are_that_weeks_own() -> None:
    # three weeks asked: seven days under each count the days, not the weeks
    text = "".join(
        f"## Week {w}\n\n" + "".join(f"### Day {d}\n- Rest.\n" for d in range(1, 8))
        for w in range(1, 4)
    )
    assert sectioned(text, "Write a 3-week plan with 3 days of rest.") is None


@pytest.mark.parametrize(
    ("prompt", "sections"),
    [
        ("Plan a 3-day trip to Rome.", ((3, "day"), (3, "trip"))),
        ("Plan 3 days in Rome.", ((3, "day"),)),
        ("Give me three recipes for dinner.", ((3, "recipe"),)),
        ("帮我规划一个3天的杭州旅游行程。", ((3, "天"),)),
        ("帮我写四章的大纲", ((4, "章"),)),
        ("我们有3个人", ()),  # a general measure word names no section
        ("I have 3 weeks off.", ()),  # described, not asked
        ("Use Python 3 features.", ()),  # a version
        ("Give me 3 step-by-step guides.", ()),  # a compound
        ("Give me 5 recipes.", ()),  # a list's count: asked_ranges bounds it
    ],
)
def test_asked_sections(prompt: str, sections: tuple[tuple[int, str], ...]) -> None:
    assert asked_sections(prompt) == sections


def test_only_the_answer_is_bounded_not_the_reasoning() -> None:
    detector = StreamDetector(CONFIG, watch="both", asked=((1, 50),))
    hit = detector.feed("reasoning", COUNT_TO) or detector.flush("reasoning")
    assert hit is None


NAMES = {
    "en": ["The Rolling Pin", "Rise & Shine", "Warm Loaf", "Nana's Oven", "Crumb & Co.",
           "Golden Crust", "Sweet Crumbs", "Flour Power", "Daily Bread", "Honey Bun",
           "Oven Door", "Butter Lane", "Proof Box", "Sift & Stir", "Dough Re Mi", "Knead It",
           "Rye Not", "Loaf Story", "Batter Days", "Crust Fund", "Whisk Away", "The Sugar Jar",
           "Bread Winner", "Sunday Bake", "Little Rise", "Yeast Side", "Bun Voyage",
           "Muffin Top", "Roll Call", "Pie Society"],
    "zh": ["麦香小屋", "暖心烘焙", "金色面包坊", "奶奶的烤箱", "甜蜜时光", "晨光面包", "小麦田",
           "香酥坊", "云朵蛋糕", "面包物语", "烘焙日记", "黄油小镇", "焦糖工坊", "麦穗人家",
           "早安面包", "蜂蜜小站", "酥皮时光", "森林烘焙", "糖果盒子", "星空甜点", "慢烤时光",
           "麦芽糖", "橘子面包", "白云烘焙", "芝士小屋", "可颂先生", "布丁日记", "饼干乐园",
           "面团工厂", "甜甜圈"],
}  # fmt: skip
ITEM = {"en": "{}. {}\n", "zh": "{}、{}\n"}


def brainstorm(lang: str, new: int, last: int, seed: int = 0) -> str:
    """A reasoning trace's numbered list: ``new`` names of its own, then items that take
    one of the last three again, on to ``last``."""
    rng = random.Random(seed)
    names = NAMES[lang]
    items = [names[i] for i in range(new)]
    items += [rng.choice(names[new - 3 : new]) for _ in range(last - new)]
    head = "Let me brainstorm first.\n\n" if lang == "en" else "先想一些名字。\n\n"
    return head + "".join(ITEM[lang].format(n, item) for n, item in enumerate(items, 1))


@pytest.mark.parametrize("lang", sorted(NAMES))
@pytest.mark.parametrize("seed", range(2))
def test_a_list_in_the_reasoning_that_says_the_same_names_past_the_range_is_cut(lang, seed):
    # ten names asked; the reasoning's list runs on, each item one of three names again
    text = brainstorm(lang, 7, 60, seed)
    hit, released = stream(text, ((1, 10),), seed, past=0, channel="reasoning")
    assert hit is not None and hit.rule == "overrun" and hit.channel == "reasoning"
    first_past = text.index(ITEM[lang].format(11, "")[:3])
    assert hit.prune_offset == first_past  # the items asked for stay
    assert released <= hit.prune_offset


@pytest.mark.parametrize("lang", sorted(NAMES))
def test_a_list_in_the_reasoning_that_drafts_more_than_asked_is_no_loop(lang):
    # thirty new names for ten asked: a draft to choose from
    text = brainstorm(lang, 30, 30)
    hit, released = stream(text, ((1, 10),), past=0, channel="reasoning")
    assert hit is None
    # and nothing held back for it: the other rules hold as much without the request
    assert released == stream(text, (), past=0, channel="reasoning")[1]


def test_a_draft_that_turns_to_saying_the_same_is_cut_where_it_does() -> None:
    # new names up to 20, then the same three on and on: cut at the run of repeats
    text = brainstorm("en", 20, 60)
    hit, _ = stream(text, ((1, 10),), channel="reasoning")
    assert hit is not None and text[hit.prune_offset :].startswith("21. ")


# --------------------------------------------------------------------------- asked ranges


@pytest.mark.parametrize(
    ("prompt", "ranges"),
    [
        ("Print the numbers from 1 to 50, one per line.", ((1, 50),)),
        ("用Python写10个空函数 task_1 到 task_10，每个函数体只有 pass。", ((1, 10),)),
        ("Write CSS classes .row-1 through .row-40.", ((1, 40),)),
        ("列出第1至第30天的计划", ()),  # a different word before each number: no range
        ("请写出 1~20 的平方", ((1, 20),)),
        # Chinese writes no space between a number and the words around it
        ("打印1到12的数字，每行一个。", ((1, 12),)),
        ("写一个函数，输入1到12的数字，返回对应的中文月份名。", ((1, 12),)),
        ("Explain it in 1-2 paragraphs.", ()),  # too few items to bound a list
        ("Give 3-5 examples.", ()),
        ("Released 2024-12-01, version 3.10-3.12", ()),
        ("Count from 10 to 5.", ()),
        ("Rows 1 to 50s", ()),
        # a count of items, in digits or in words, asks for the items 1 to N
        ("Give me 50 user ids, one per line.", ((1, 50),)),
        ("Write ten stubs.", ((1, 10),)),
        ("请写出30个用户编号。", ((1, 30),)),
        ("列出二十条建议", ((1, 20),)),
        ("给我的小说列一个10章的章节目录。", ((1, 10),)),  # chapters, days: items of a list
        ("帮我制定一个21天早起计划。", ((1, 21),)),
        ("I have 3 cats and 2 dogs.", ()),  # too few to bound a list
        ("In 2024 there were storms.", ()),  # a year
        ("Explain it in 10 to 12 words.", ()),  # a range too short, a length
        ("Summarise it in 100 words.", ()),
        # a number after a name is a version, no count: a list of 14 features is no overrun
        ("What are the new Java 8 features?", ()),
        ("List Windows 10 tips for speed.", ()),
        ("Best iPhone 15 cases under $50?", ()),
        ("Summarise the Chapter 12 themes.", ()),
        ("Show me the Top 10 films of 2020.", ((1, 10),)),  # a ranking word: a count
        ("List 50 states.", ((1, 50),)),  # a word that opens its sentence: a count
        # a count the sentence does not ask for describes: the answer's lists are its own
        ("I manage a team of 6 engineers. Suggest some team-building activities.", ()),
        ("Plan a party for 20 guests.", ()),
        ("Write an FAQ page for our garden. We have 40 plots and a waiting list.", ()),
        ("我们团队有6个人，推荐一些团建活动。", ()),
        ("What are 10 good names for a dog?", ((1, 10),)),
        ("10 tips for better sleep, please.", ((1, 10),)),
        ("Seed the poems table with 20 rows.", ((1, 20),)),
        ("生成一份CSV格式的员工信息表，30行，用于导入功能测试。", ((1, 30),)),
        ("用Java写一个Student类，有15个属性。", ((1, 15),)),
    ],
)
def test_asked_ranges(prompt: str, ranges: tuple[tuple[int, int], ...]) -> None:
    assert asked_ranges(prompt) == ranges
