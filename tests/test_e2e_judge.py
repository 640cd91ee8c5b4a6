"""How make e2e counts the loop chars a client got (e2e/run.py judge, e2e/build_corpus.py check)."""

from __future__ import annotations

import pytest
from e2e.build_corpus import LabelError, check
from e2e.run import (
    Direct,
    Looping,
    client_loop_chars,
    judge,
    periodic_run_chars,
    restated_line_chars,
)

# A paragraph re-emitted as near-copies; its first copy holds an exact run of "灯烛、" from 45.
PARAGRAPH = (
    "光合作用是一种编界的生命空氣，它是一种编界的生命空氣，它可以福制地挖掖空氣，使光花灭火灯、"
    + ("灯烛、" * 31)
)
DIRECT = (PARAGRAPH + "！\n\n") * 3
SHOWN = DIRECT[:48]  # the paragraph up to the run, and one copy of the run


def _judge(keep: int) -> int:
    item = Looping("p", "什么是光合作用？", 0, 3, DIRECT, keep)
    direct = Direct(DIRECT, "length", 700, True)
    answer = SHOWN + "\n〔已删除 81 个字符的重复文本〕\n说明没有什么问题。"
    return judge(item, direct, answer, "stop", [], []).leaked


def test_a_first_copy_shown_is_not_leaked_but_past_it_is() -> None:
    assert _judge(keep=48) == 0
    assert _judge(keep=3) == 45  # counted from the inner period alone, the first copy leaks


def test_first_copy_must_be_a_positive_count() -> None:
    label = {"label": "loop", "kind": "paragraph", "onset": 0, "exact_from": 45, "period": 3}
    check("p@t0", DIRECT, {**label, "first_copy": 48, "unaligned": True})
    with pytest.raises(LabelError, match="first_copy"):
        check("p@t0", DIRECT, {**label, "first_copy": "48", "unaligned": True})


ITEM_A = "可以使用finally来做系统，实现对函数进行代码处理。"
ITEM_B = "这就是一种静急的退 Scytroft 的技巧，每一个问题维持早期内根调度管理。"


def test_a_list_re_emitting_one_item_between_others_is_loop_text_on_the_client() -> None:
    # no run of copies (the other item changes), but one item said five times
    others = ["可以将try-except部件的返回值增大。", "可以使用finally来释放全部回开。", ITEM_A]
    others += [
        "措上一条回答，请让我原来从这里开始。",
        "掠过finally的代码求值是从上一个函数的返回值。",
    ]
    answer = "".join(f"1. {other}\n\n2. {ITEM_B}\n\n" for other in others)
    assert periodic_run_chars(answer) == 0
    assert restated_line_chars(answer) == 3 * len(f"2. {ITEM_B}\n")  # its third, fourth, fifth
    assert client_loop_chars(answer) == restated_line_chars(answer)
    # before the onset (what the label calls the answer), nothing counts
    assert restated_line_chars(answer, onset=len(answer)) == 0


def test_a_point_restated_once_and_short_recurring_lines_are_no_loop_text() -> None:
    table = "| 数字 | 两倍 |\n| --- | --- |\n" + "".join(f"| {n} | {2 * n} |\n" for n in range(20))
    code = "```python\ndef f():\n    pass\n```\n" * 4
    twice = f"- {ITEM_A}\n- {ITEM_B}\n- {ITEM_A}\n- {ITEM_B}\n"
    for answer in (table, code, twice):
        assert restated_line_chars(answer) == 0, answer
