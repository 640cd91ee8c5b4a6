"""prompt-bloat: consecutive strictly growing request prompts."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.prompt_bloat import PromptBloatRule


def grow(rule: PromptBloatRule, seq: int, header: int) -> None:
    rule.on_request_header(seq, header)
    rule.on_request()


def test_three_growths_in_a_row() -> None:
    rule = PromptBloatRule(DoctorConfig())
    rule.on_system_prompt(7, 100)
    rule.on_request_header(10, 1000)
    rule.on_request()
    grow(rule, 20, 1100)
    grow(rule, 30, 1200)
    assert rule.close_turn(1) == []  # two growths so far
    grow(rule, 40, 1300)
    (signal,) = rule.close_turn(2)
    assert (signal.kind, signal.turn, signal.metric) == ("prompt-bloat", 2, 3)
    assert signal.evidence == (7, 10, 20, 30, 40)
    assert "from 1100 to 1400 bytes" in signal.explanation


def test_unchanged_or_shrinking_prompt_resets() -> None:
    rule = PromptBloatRule(DoctorConfig())
    grow(rule, 1, 100)
    grow(rule, 2, 200)
    grow(rule, 3, 200)  # resumed process logs the same header again
    grow(rule, 4, 300)
    grow(rule, 5, 400)
    assert rule.close_turn(1) == []
    grow(rule, 6, 500)
    assert rule.close_turn(2)[0].metric == 3


def test_requests_without_new_prompt_parts_are_not_observations() -> None:
    rule = PromptBloatRule(DoctorConfig())
    grow(rule, 1, 100)
    for _ in range(5):
        rule.on_request()
    grow(rule, 2, 200)
    grow(rule, 3, 300)
    grow(rule, 4, 400)
    assert rule.close_turn(1)[0].metric == 3


def test_system_and_header_in_one_step_are_one_observation() -> None:
    rule = PromptBloatRule(DoctorConfig(promptBloatSteps=2))
    for seq in range(0, 40, 10):
        rule.on_request_header(seq, 1000)
        rule.on_system_prompt(seq + 1, 10 + seq)
        rule.on_request()
    (signal,) = rule.close_turn(1)
    assert signal.metric == 3


def test_a_turn_without_growth_does_not_repeat_the_signal() -> None:
    rule = PromptBloatRule(DoctorConfig())
    for seq, size in enumerate((1, 2, 3, 4)):
        grow(rule, seq, size)
    assert len(rule.close_turn(1)) == 1
    rule.on_request()
    assert rule.close_turn(2) == []
    grow(rule, 9, 5)
    assert rule.close_turn(3)[0].metric == 4
