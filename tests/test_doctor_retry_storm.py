"""retry-storm, statement by statement (docs/doctor.md, `retry-storm`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import analyze_log
from looprescue.doctor.retry_storm import RetryStormRule


def turn_with_retries(log: SessionBuilder, retries: int) -> list[int]:
    """One turn whose model request failed ``retries`` times; returns attempt, retry seqs."""
    log.start_turn()
    log.next_step()
    seqs = []
    for _ in range(retries):
        seqs.extend(log.retry())
    log.assistant("The answer, at last.")
    log.end_turn()
    return seqs


def test_llm_retries_of_one_turn_are_a_retry_storm() -> None:
    log = SessionBuilder()
    evidence = turn_with_retries(log, 2)
    (signal,) = analyze_log(log.events, "s")
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("retry-storm", None, 1, 2)
    assert signal.evidence == tuple(evidence)


def test_retry_storm_min_defaults_to_two_retries_in_one_turn() -> None:
    log = SessionBuilder()
    turn_with_retries(log, 1)
    assert analyze_log(log.events, "s") == []
    assert [s.metric for s in analyze_log(log.events, "s", {"retryStormMin": 1})] == [1]


def test_retries_of_different_turns_never_add_up() -> None:
    log = SessionBuilder()
    turn_with_retries(log, 1)
    turn_with_retries(log, 1)
    assert analyze_log(log.events, "s") == []


def test_metric_is_the_retries_in_the_turn() -> None:
    log = SessionBuilder()
    turn_with_retries(log, 1)
    turn_with_retries(log, 4)
    assert [(s.turn, s.metric) for s in analyze_log(log.events, "s")] == [(2, 4)]


def test_evidence_is_every_retry_and_the_failed_attempt_before_it() -> None:
    log = SessionBuilder()
    turn_with_retries(log, 3)
    (signal,) = analyze_log(log.events, "s")
    types = [log.events[seq]["type"] for seq in signal.evidence]
    assert types == ["assistant/attempt", "llm/retry"] * 3


def test_a_retry_without_a_logged_attempt_is_still_counted() -> None:
    rule = RetryStormRule(DoctorConfig(retryStormMin=3))
    for seq in (7, 8, 9):
        rule.on_retry(seq)
    (signal,) = rule.close_turn(2)
    assert signal.metric == 3 and signal.evidence == (7, 8, 9)


def test_evidence_is_capped_at_max_evidence_while_the_metric_keeps_counting() -> None:
    rule = RetryStormRule(DoctorConfig(maxEvidence=4))
    for seq in range(100, 120):
        rule.on_retry(seq)
    (signal,) = rule.close_turn(1)
    assert signal.metric == 20
    assert signal.evidence == (100, 101, 102, 103)


def test_the_explanation_names_the_threshold() -> None:
    log = SessionBuilder()
    turn_with_retries(log, 2)
    (signal,) = analyze_log(log.events, "s")
    assert "retried 2 times in this turn (retryStormMin 2)" in signal.explanation
