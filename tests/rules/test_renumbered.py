"""Rule renumbered: a numbered item whose sentence stays while its number moves on."""

from __future__ import annotations

import pytest
from tests.detect_helpers import stream

from looprescue.detect import scan_text

LEAD = "Here is the plan for the migration, step by step.\n\n"
ITEM = "Back up the database before running the migration script."


def _items(numbers, between: str = "") -> str:
    return "".join(f"{n}. {ITEM}\n{between}" for n in numbers)


def test_an_item_said_again_under_new_numbers_with_notes_between_is_cut_after_one_copy():
    note = "\nNote: the backup takes a few minutes on a large database.\n\n"
    text = LEAD + "1. Stop the workers.\n" + _items(range(2, 12), note)
    hit = stream(text, "text", sizes=(3, 7))
    assert hit is not None and hit.rule == "renumbered"
    second = text.index(f"3. {ITEM}")
    assert hit.prune_offset == second and hit.loop_start == text.index(f"2. {ITEM}")
    # found at the third copy
    assert hit.fired_at == text.index(f"4. {ITEM}") + len(f"4. {ITEM}\n")
    assert scan_text(text, "reasoning")[0].prune_offset == second


def test_a_chinese_item_counts_its_width():
    item = "先备份整个数据库，再运行迁移脚本。"  # 17 chars, 32 wide
    notes = [
        "备份需要几分钟。",
        "大表会更慢一些。",
        "记得检查磁盘空间。",
        "副本也要同步。",
        "完成后通知团队。",
    ]
    text = "迁移步骤如下。\n\n" + "".join(
        f"{n}. {item}\n\n说明：{note}\n\n" for n, note in enumerate(notes, 1)
    )
    hit = stream(text, "reasoning", sizes=(5,))
    assert hit is not None and hit.rule == "renumbered"
    assert hit.prune_offset == text.index(f"2. {item}")


def test_items_that_do_not_count_on_or_are_short_are_no_loop():
    # the same sentence in two lists (numbers restart), and a list of short answers
    two_lists = _items([1, 2]) + "\nAnd for the replica:\n\n" + _items([1, 2]) + "\nDone.\n"
    assert scan_text(LEAD + two_lists, "text") == []
    answers = "".join(f"{n}. Yes, that is fine.\n\nWhy: case {n * 7}.\n\n" for n in range(1, 12))
    assert scan_text(LEAD + answers, "text") == []


def test_copies_far_apart_are_no_loop():
    def filler(n: int) -> str:
        return " ".join(f"Section {n} point {w} covers a separate concern." for w in range(40))

    text = LEAD + "".join(f"{n}. {ITEM}\n\n{filler(n)}\n\n" for n in range(1, 6))
    assert scan_text(text, "text") == []


def test_an_item_inside_a_fence_is_code():
    text = LEAD + "```\n" + _items(range(1, 10), "# note\n") + "```\n"
    assert scan_text(text, "text") == []


def test_renumbered_list_is_not_a_loop():
    steps = [
        "Back up the session file.",
        "Check that DSH is not running.",
        "Run the cleaner with --dry-run.",
        "Read the diff it prints.",
        "Run it again without --dry-run.",
        "Resume the session.",
    ]
    first = "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 1))
    again = "".join(f"{i}. {s}\n" for i, s in enumerate(steps, 7))
    text = (
        "The procedure:\n" + first + "\nAnd for the second session, continuing the count:\n" + again
    )
    assert scan_text(text, "text") == []
    assert scan_text(text, "reasoning") == []


ZH_ITEM = "员工应严格遵守公司的各项规章制度，按时上下班。"  # 23 chars, 46 wide
ZH_MARKS = {
    "digits": lambda n: f"{n}、",
    "parenthesised": lambda n: f"（{'一二三四五六七八九十'[n - 1]}）",
    "words": lambda n: f"{'一二三四五六七八九十'[n - 1]}、",
    "article": lambda n: f"第{'一二三四五六七八九十'[n - 1]}条 ",
}


@pytest.mark.parametrize("mark", sorted(ZH_MARKS))
@pytest.mark.parametrize("channel", ["reasoning", "text"])
def test_a_chinese_list_mark_counts_on_as_a_list_number_does(mark, channel):
    number = ZH_MARKS[mark]
    lead = "公司考勤制度如下。\n\n" + number(1) + "上班时间为每天早上九点到下午六点。\n"
    text = lead + "".join(f"{number(n)}{ZH_ITEM}\n" for n in range(2, 10))
    for sizes in ((3,), (1, 5, 2)):
        hit = stream(text, channel, sizes=sizes)
        assert hit is not None and hit.rule in ("renumbered", "counter"), (mark, sizes)
        assert hit.prune_offset == text.index(number(3) + ZH_ITEM), (mark, sizes)
    # with a note between copies there is no period: only this rule sees it
    note = "\n说明：本条自发布之日起执行。\n\n"
    noted = lead + "".join(f"{number(n)}{ZH_ITEM}\n{note}" for n in range(2, 10))
    hit = stream(noted, channel, sizes=(4,))
    assert hit is not None and hit.rule == "renumbered", mark
    assert hit.prune_offset == noted.index(number(3) + ZH_ITEM)


def test_a_sentence_under_numbers_that_skip_is_a_plan_not_a_loop():
    # a rest day says the same every week: its number moves on by seven, not by one
    days = []
    for day in range(1, 22):
        if day % 7 == 0:
            days.append(f"{day}. Rest day: a gentle walk and some stretching, nothing more.\n")
        else:
            days.append(f"{day}. Run {day % 5 + 3} km at an easy pace, then cool down.\n")
    text = "Your three-week plan:\n\n" + "".join(days)
    assert scan_text(text, "text") == []
    assert stream(text, "reasoning", sizes=(3,)) is None
    zh = "三周计划：\n\n" + "".join(
        f"第{day}天 每周日休息一天，只做轻松的散步和拉伸。\n"
        if day % 7 == 0
        else f"第{day}天 慢跑{day % 5 + 3}公里，然后放松。\n"
        for day in range(1, 22)
    )
    assert scan_text(zh, "text") == []
