"""narration-loop, statement by statement (docs/doctor.md, `narration-loop`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import analyze_log
from looprescue.doctor.narration import NarrationLoopRule

LINE = "Let me check the configuration file once more to be sure."
OTHER = "Now something else entirely, a different message body."


def run(*texts: str, config: DoctorConfig | None = None) -> list[tuple]:
    rule = NarrationLoopRule(config or DoctorConfig())
    for seq, text in enumerate(texts, 1):
        rule.on_assistant_text(seq, text)
    return [(s.metric, s.evidence) for s in rule.close_turn(1)]


def narrations(log: SessionBuilder) -> list[tuple]:
    return [
        (s.turn, s.metric, s.evidence)
        for s in analyze_log(log.events, "s")
        if s.kind == "narration-loop"
    ]


def test_the_same_text_in_consecutive_assistant_messages_of_one_turn_is_a_loop() -> None:
    log = SessionBuilder()
    log.start_turn()
    seqs = []
    for _ in range(3):
        log.next_step()
        seqs.append(log.assistant(LINE))
    log.end_turn()
    (signal,) = analyze_log(log.events, "s")
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == ("narration-loop", None, 1, 3)
    assert signal.evidence == tuple(seqs)


def test_whitespace_is_collapsed_and_volatile_tokens_are_masked() -> None:
    texts = (LINE + " (took 3s)", "  " + LINE.replace(" ", "\n  ") + " (took 12s)", LINE + " 1.5s")
    assert run(*texts) == []  # "1.5s" is not "(took …)": different text
    assert run(texts[0], texts[1], LINE + " (took 1.5s)") == [(3, (1, 2, 3))]


def test_messages_without_text_neither_extend_nor_break_a_run() -> None:
    assert run(LINE, "", LINE, "", "", LINE) == [(3, (1, 3, 6))]
    assert run(LINE, "", "") == []


def test_a_different_text_breaks_the_run() -> None:
    assert run(LINE, LINE, OTHER, LINE) == []


def test_a_human_prompt_breaks_the_run() -> None:
    log = SessionBuilder()
    log.start_turn()
    for step in range(3):
        log.next_step()
        if step == 2:
            log.user("Stop repeating yourself.")
        log.assistant(LINE)
    log.end_turn()
    assert narrations(log) == []


def test_an_injected_message_such_as_a_reminder_does_not_break_the_run() -> None:
    log = SessionBuilder()
    log.start_turn()
    for step in range(3):
        log.next_step()
        if step == 2:
            log.user("You are repeating the exact same tool call.", kind="repeat-tool-reminder")
        log.assistant(LINE)
    log.end_turn()
    assert [metric for _, metric, _ in narrations(log)] == [3]


def test_reasoning_is_not_compared() -> None:
    log = SessionBuilder()
    log.start_turn()
    for text in (LINE, OTHER, LINE):
        log.next_step()
        log.assistant(text)  # the builder gives every message the same reasoning
    log.end_turn()
    assert narrations(log) == []
    log = SessionBuilder()
    log.start_turn()
    for i in range(3):
        log.next_step()
        seq = log.assistant(LINE)
        log.events[seq]["data"]["message"]["content"][0]["text"] = f"Reasoning number {i}."
    log.end_turn()
    assert [metric for _, metric, _ in narrations(log)] == [3]


def test_a_run_never_spans_two_turns() -> None:
    log = SessionBuilder()
    for _ in range(2):
        log.start_turn()
        for _ in range(2):
            log.next_step()
            log.assistant(LINE)
        log.end_turn()
    assert narrations(log) == []


def test_narration_min_repeats_defaults_to_three_messages() -> None:
    assert run(LINE, LINE) == []
    assert run(LINE, LINE, config=DoctorConfig(narrationMinRepeats=2)) == [(2, (1, 2))]


def test_a_text_shorter_than_narration_min_chars_is_never_part_of_a_run() -> None:
    assert run(*["OK, checking it again."] * 5) == []  # 22 chars < 40
    assert run(*["OK."] * 5, config=DoctorConfig(narrationMinChars=3)) == [(5, (1, 2, 3, 4, 5))]
    assert run(LINE, LINE, "OK.", LINE) == []  # and it breaks a run like any other text


def test_metric_is_the_messages_of_the_longest_run_of_the_turn() -> None:
    assert run(LINE, LINE, LINE, OTHER, OTHER, OTHER, OTHER) == [(4, (4, 5, 6, 7))]


def test_evidence_is_the_assistant_message_seqs() -> None:
    log = SessionBuilder()
    log.start_turn()
    for i in range(3):
        log.next_step()
        log.tool("grep", {"pattern": "x"}, f"{i} hits", text=LINE)
    log.end_turn()
    ((_, _, evidence),) = narrations(log)
    assert [log.events[seq]["type"] for seq in evidence] == ["assistant/message"] * 3
