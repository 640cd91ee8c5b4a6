"""narration-loop: the same assistant text in consecutive messages."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.narration import NarrationLoopRule

LINE = "Let me check the configuration file once more to be sure."


def test_three_identical_texts_in_a_turn() -> None:
    rule = NarrationLoopRule(DoctorConfig())
    for seq in (10, 20, 30):
        rule.on_assistant_text(seq, LINE)
    (signal,) = rule.close_turn(1)
    assert (signal.kind, signal.turn, signal.metric, signal.evidence) == (
        "narration-loop",
        1,
        3,
        (10, 20, 30),
    )


def test_whitespace_and_volatile_tokens_do_not_matter_tool_only_messages_are_neutral() -> None:
    rule = NarrationLoopRule(DoctorConfig())
    rule.on_assistant_text(1, LINE + " (took 3s)")
    rule.on_assistant_text(2, "")
    rule.on_assistant_text(3, "  " + LINE.replace(" ", "\n  ") + " (took 12s)")
    rule.on_assistant_text(4, LINE + " (took 1.5s)")
    assert rule.close_turn(1)[0].evidence == (1, 3, 4)


def test_different_text_human_prompt_or_turn_end_break_the_run() -> None:
    rule = NarrationLoopRule(DoctorConfig())
    rule.on_assistant_text(1, LINE)
    rule.on_assistant_text(2, LINE)
    rule.on_assistant_text(3, "Now something else entirely, a different message body.")
    rule.on_assistant_text(4, LINE)
    assert rule.close_turn(1) == []
    rule.on_assistant_text(5, LINE)
    rule.on_assistant_text(6, LINE)
    rule.on_break()
    rule.on_assistant_text(7, LINE)
    assert rule.close_turn(2) == []


def test_short_texts_are_ignored() -> None:
    rule = NarrationLoopRule(DoctorConfig())
    for seq in range(5):
        rule.on_assistant_text(seq, "OK.")
    assert rule.close_turn(1) == []
    rule = NarrationLoopRule(DoctorConfig(narrationMinChars=3))
    for seq in range(5):
        rule.on_assistant_text(seq, "OK.")
    assert rule.close_turn(1)[0].metric == 5
