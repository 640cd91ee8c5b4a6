"""tool-cycle: A,B,A,B,… of width 2-5 repeated >= 3 times."""

from __future__ import annotations

from looprescue.config import DoctorConfig
from looprescue.doctor.identity import CompletedCall, digest, result_digest
from looprescue.doctor.tool_cycles import ToolCycleRule, has_smaller_period


def calls(pattern: str, start: int = 0, results: list[str] | None = None) -> list[CompletedCall]:
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


def run(pattern: str, config: DoctorConfig | None = None, results: list[str] | None = None):
    rule = ToolCycleRule(config or DoctorConfig())
    for c in calls(pattern, results=results):
        rule.on_call(c)
    return rule.close_turn(1)


def test_smaller_period() -> None:
    assert has_smaller_period(("a", "a"))
    assert has_smaller_period(("a", "b", "a", "b"))
    assert not has_smaller_period(("a", "b"))
    assert not has_smaller_period(("a", "a", "b"))


def test_abab_three_times_is_a_cycle() -> None:
    (signal,) = run("ABABAB")
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "tool-cycle",
        "cycle:tool_a>tool_b",
        1,
        3,
    )
    assert signal.evidence == (0, 10, 20, 30, 40, 50)


def test_two_repeats_are_not_enough() -> None:
    assert run("ABAB") == []
    assert run("ABABA") == []


def test_widths_three_to_five() -> None:
    for unit in ("ABC", "ABCD", "ABCDE", "AAB"):
        (signal,) = run(unit * 3)
        assert signal.metric == 3
        assert signal.sub == "cycle:" + ">".join(f"tool_{c.lower()}" for c in unit)
    assert run("ABCDEF" * 3) == []  # wider than toolCycleMaxWidth


def test_identical_calls_belong_to_the_repeat_rule_not_here() -> None:
    assert run("AAAAAAAAAAAA") == []


def test_cycle_after_noise_and_longest_stretch_wins() -> None:
    (signal,) = run("XYZ" + "ABABABAB" + "Q" + "ABABAB")
    assert signal.metric == 4
    assert len(signal.evidence) == 8


def test_cycle_of_polls_with_changing_results_is_not_a_cycle() -> None:
    results = [f"progress {i}" for i in range(6)]
    assert run("ABABAB", results=results) == []


def test_turn_boundary_resets() -> None:
    rule = ToolCycleRule(DoctorConfig())
    for c in calls("ABAB"):
        rule.on_call(c)
    assert rule.close_turn(1) == []
    for c in calls("AB", start=100):
        rule.on_call(c)
    assert rule.close_turn(2) == []


def test_configurable_repeats_and_width() -> None:
    assert run("ABAB", DoctorConfig(toolCycleMinRepeats=2))[0].metric == 2
    assert run("ABCD" * 3, DoctorConfig(toolCycleMaxWidth=3)) == []
