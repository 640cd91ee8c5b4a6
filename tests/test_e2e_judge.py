"""How make e2e counts the loop chars a client got (e2e/run.py judge, e2e/build_corpus.py check)."""

from __future__ import annotations

import pytest
from e2e.build_corpus import LabelError, check
from e2e.run import Direct, Looping, judge

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
