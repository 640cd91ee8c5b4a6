"""tool-cycle, statement by statement (docs/doctor.md, `tool-cycle`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import analyze_log
from looprescue.doctor.fold import ToolCallFold
from looprescue.doctor.identity import CompletedCall, digest, result_digest
from looprescue.doctor.tool_cycles import ToolCycleRule, has_smaller_period


def calls(pattern: str, start: int = 0, results: list[str] | None = None) -> list[CompletedCall]:
    """One call per letter: tool_<letter>, the same arguments and result for the same letter."""
    out = []
    for i, letter in enumerate(pattern):
        result = results[i] if results else "same"
        out.append(
            CompletedCall(
                call_seq=start + 10 * i,
                turn=1,
                name=f"tool_{letter.lower()}",
                args_digest=digest(letter),
                result_seq=start + 10 * i + 1,
                result_key=result_digest(False, None, result),
            )
        )
    return out


def fold_for(config: DoctorConfig) -> ToolCallFold:
    return ToolCallFold(config.toolCycleMaxWidth, config.maxTrackedTools, config.maxEvidence)


def run(pattern: str, config: DoctorConfig | None = None, results: list[str] | None = None):
    config = config or DoctorConfig()
    rule, fold = ToolCycleRule(config), fold_for(config)
    for c in calls(pattern, results=results):
        rule.on_step(fold.on_call(c))
    rule.on_step(fold.close_turn())
    return rule.close_turn(1)


def test_a_sequence_of_two_calls_repeated_back_to_back_is_a_cycle() -> None:
    (signal,) = run("ABABAB")
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "tool-cycle",
        "cycle:tool_a>tool_b",
        1,
        3,
    )


def test_widths_run_from_two_to_tool_cycle_max_width() -> None:
    for unit in ("AB", "ABC", "ABCD", "ABCDE", "AAB"):
        (signal,) = run(unit * 3)
        assert signal.metric == 3
        assert signal.sub == "cycle:" + ">".join(f"tool_{c.lower()}" for c in unit)
    assert run("ABCDEF" * 3) == []  # wider than the default toolCycleMaxWidth 5
    assert run("ABCD" * 3, DoctorConfig(toolCycleMaxWidth=3)) == []
    assert run("ABCDEF" * 3, DoctorConfig(toolCycleMaxWidth=6))[0].metric == 3


def test_the_sub_names_the_units_tools_in_the_order_the_cycle_started_with() -> None:
    assert [s.sub for s in run("BABABA")] == ["cycle:tool_b>tool_a"]
    assert [s.sub for s in run("CAB" * 3)] == ["cycle:tool_c>tool_a>tool_b"]


def test_calls_whose_results_change_are_no_cycle() -> None:
    assert run("ABABAB", results=[f"progress {i}" for i in range(6)]) == []


def test_a_different_call_in_between_breaks_the_stretch() -> None:
    assert run("ABAB" + "C" + "ABAB") == []


def test_a_unit_that_is_itself_a_repetition_is_left_to_the_narrower_width() -> None:
    assert has_smaller_period(("a", "a")) and has_smaller_period(("a", "b", "a", "b"))
    assert not has_smaller_period(("a", "b")) and not has_smaller_period(("a", "a", "b"))
    assert run("A" * 12) == []  # width 1 is the repeat rule's
    assert [(s.sub, s.metric) for s in run("AB" * 6)] == [("cycle:tool_a>tool_b", 6)]


def test_tool_cycle_min_repeats_defaults_to_three_full_repeats() -> None:
    assert run("ABAB") == []
    assert run("ABABA") == []
    assert run("ABAB", DoctorConfig(toolCycleMinRepeats=2))[0].metric == 2


def test_metric_is_the_whole_units_in_the_stretch() -> None:
    assert [s.metric for s in run("ABABABA")] == [3]
    assert [s.metric for s in run("ABCABCABCAB")] == [3]


def test_per_cycle_and_turn_only_the_longest_stretch_is_reported() -> None:
    (signal,) = run("XYZ" + "ABABABAB" + "Q" + "ABABAB")
    assert signal.metric == 4
    assert signal.evidence == tuple(10 * i for i in range(3, 11))


def test_evidence_is_the_tool_call_seqs_of_the_cyclic_stretch() -> None:
    (signal,) = run("X" + "ABABABA")
    assert signal.evidence == (10, 20, 30, 40, 50, 60, 70)


def test_a_cycle_never_spans_two_turns() -> None:
    rule, fold = ToolCycleRule(DoctorConfig()), fold_for(DoctorConfig())
    for c in calls("ABAB"):
        rule.on_step(fold.on_call(c))
    rule.on_step(fold.close_turn())
    assert rule.close_turn(1) == []
    for c in calls("AB", start=100):
        rule.on_step(fold.on_call(c))
    rule.on_step(fold.close_turn())
    assert rule.close_turn(2) == []


def test_example_read_then_bash_make_three_times_is_cycle_read_bash_metric_3() -> None:
    log = SessionBuilder()
    log.start_turn()
    for _ in range(3):
        log.next_step()
        log.tool("read", {"file_path": "a.txt"}, "int main() {}")
        log.next_step()
        log.tool("bash", {"command": "make"}, "error: a.txt:1: missing return; took 0.4s")
    log.end_turn()
    (signal,) = analyze_log(log.events, "s")
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "tool-cycle",
        "cycle:read>bash",
        1,
        3,
    )
    assert [log.events[seq]["type"] for seq in signal.evidence] == ["tool/call"] * 6
