"""prompt-bloat, statement by statement (docs/doctor.md, `prompt-bloat`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import analyze_log
from looprescue.doctor.events import request_header_size
from looprescue.doctor.prompt_bloat import PromptBloatRule


def grow(rule: PromptBloatRule, seq: int, header: int) -> None:
    rule.on_request_header(seq, header)
    rule.on_request()


def steps_with_headers(log: SessionBuilder, tool_counts: list[int]) -> None:
    for tools in tool_counts:
        log.next_step()
        log.request_header(tools)
        log.assistant("", [])


def test_the_size_is_system_prompt_characters_plus_header_bytes() -> None:
    rule = PromptBloatRule(DoctorConfig(promptBloatSteps=2))
    rule.on_system_prompt(1, 100)
    grow(rule, 2, 1000)
    rule.on_system_prompt(3, 150)  # the system prompt alone grows
    rule.on_request()
    grow(rule, 4, 1010)
    (signal,) = rule.close_turn(1)
    assert "from 1100 to 1160 bytes" in signal.explanation


def test_reason_and_starts_series_are_not_counted_so_a_resume_alone_is_not_growth() -> None:
    log = SessionBuilder()
    log.start_turn()
    steps_with_headers(log, [4, 5, 6])
    log.end_turn()
    log.start_turn()
    log.next_step()
    resumed = dict(log.events[-6]["data"], reason="resume", startsSeries=True)
    assert request_header_size(resumed) == request_header_size(log.events[-6]["data"])
    log.add("request/header", resumed)
    log.assistant("", [])
    log.end_turn()
    assert analyze_log(log.events, "s") == []  # 4, 5, 6 tools, then 6 again: two growths


def test_each_model_request_after_a_logged_prompt_part_is_one_observation() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    for tools in (10, 12, 14, 16):
        log.request_header(tools)
        log.retry()  # a failed request (assistant/attempt) observed the new size
    log.assistant("Answer.", [])
    log.end_turn()
    signals = analyze_log(log.events, "s", {"retryStormMin": 5})
    assert [(s.kind, s.metric) for s in signals] == [("prompt-bloat", 3)]


def test_a_request_that_logged_nothing_new_is_not_an_observation() -> None:
    rule = PromptBloatRule(DoctorConfig())
    grow(rule, 1, 100)
    for _ in range(5):
        rule.on_request()
    grow(rule, 2, 200)
    grow(rule, 3, 300)
    grow(rule, 4, 400)
    assert rule.close_turn(1)[0].metric == 3


def test_system_prompt_and_header_logged_before_one_request_are_one_observation() -> None:
    rule = PromptBloatRule(DoctorConfig(promptBloatSteps=2))
    for seq in range(0, 40, 10):
        rule.on_request_header(seq, 1000)
        rule.on_system_prompt(seq + 1, 10 + seq)
        rule.on_request()
    assert rule.close_turn(1)[0].metric == 3


def test_prompt_bloat_steps_growths_in_a_row_need_four_observations_by_default() -> None:
    rule = PromptBloatRule(DoctorConfig())
    rule.on_system_prompt(7, 100)
    rule.on_request_header(10, 1000)
    rule.on_request()
    grow(rule, 20, 1100)
    grow(rule, 30, 1200)
    assert rule.close_turn(1) == []  # three observations, two growths
    grow(rule, 40, 1300)
    (signal,) = rule.close_turn(2)
    assert (signal.kind, signal.turn, signal.metric) == ("prompt-bloat", 2, 3)


def test_an_observation_that_is_not_larger_starts_a_new_run() -> None:
    rule = PromptBloatRule(DoctorConfig())
    grow(rule, 1, 100)
    grow(rule, 2, 200)
    grow(rule, 3, 200)  # the same size again
    grow(rule, 4, 300)
    grow(rule, 5, 400)
    assert rule.close_turn(1) == []
    grow(rule, 6, 500)
    assert rule.close_turn(2)[0].metric == 3
    grow(rule, 7, 100)  # smaller
    grow(rule, 8, 200)
    grow(rule, 9, 300)
    assert rule.close_turn(3) == []


def test_reported_at_the_end_of_every_turn_the_run_grew_in_once_at_the_threshold() -> None:
    rule = PromptBloatRule(DoctorConfig())
    for seq, size in enumerate((1, 2, 3, 4)):
        grow(rule, seq, size)
    assert [s.metric for s in rule.close_turn(1)] == [3]
    rule.on_request()
    assert rule.close_turn(2) == []  # the run did not grow in this turn
    grow(rule, 9, 5)
    assert [(s.turn, s.metric) for s in rule.close_turn(3)] == [(3, 4)]


def test_evidence_is_the_prompt_events_of_the_run() -> None:
    rule = PromptBloatRule(DoctorConfig())
    grow(rule, 1, 500)
    grow(rule, 2, 50)  # shrank: the run starts here
    rule.on_system_prompt(3, 10)
    rule.on_request_header(4, 60)
    rule.on_request()
    grow(rule, 5, 80)
    grow(rule, 6, 90)
    (signal,) = rule.close_turn(1)
    assert signal.evidence == (2, 3, 4, 5, 6)


def test_example_headers_with_10_12_14_16_tools_on_four_steps_is_metric_3() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.system("You are an agent.")
    steps_with_headers(log, [10, 12, 14, 16])
    log.end_turn()
    (signal,) = analyze_log(log.events, "s")
    assert (signal.kind, signal.turn, signal.metric) == ("prompt-bloat", 1, 3)
    parts = [e["seq"] for e in log.events if e["type"] in ("system/message", "request/header")]
    assert signal.evidence == tuple(parts)
