"""Properties of the fold: prefix-then-rest equals one shot, replay is deterministic, and key
order of tool arguments never splits a run."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import SessionAnalysis, analyze_log

# Low thresholds make every rule fire often on small random logs.
EAGER = DoctorConfig(
    retryStormMin=1,
    repeatToolMin=2,
    compactionThreshold=2,
    injectThreshold=3,
    delegationThreshold=2,
    promptBloatSteps=2,
    toolCycleMinRepeats=2,
    narrationMinRepeats=2,
    narrationMinChars=5,
    maxTrackedTools=4,
    maxEvidence=5,
)
CONFIGS = st.sampled_from([DoctorConfig(), EAGER])

ACTIONS = st.one_of(
    st.tuples(st.just("turn")),
    st.tuples(
        st.just("tool"),
        st.sampled_from(["read", "bash", "grep"]),
        st.integers(0, 1),
        st.integers(0, 1),
        st.booleans(),
    ),
    st.tuples(st.just("retry")),
    st.tuples(st.just("text"), st.integers(0, 2)),
    st.tuples(
        st.just("user"), st.sampled_from(["user", "runtime-context", "repeat-tool-reminder"])
    ),
    st.tuples(st.just("compaction")),
    st.tuples(st.just("header"), st.integers(1, 6)),
    st.tuples(st.just("marker")),
    st.tuples(st.just("bloat")),
    st.tuples(st.just("cycle"), st.integers(2, 4), st.integers(1, 3)),
)


def build(actions: list[tuple]) -> list[dict[str, Any]]:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    tools = 0
    for action in actions:
        match action:
            case ("turn",):
                log.end_turn()
                log.start_turn()
                log.next_step()
            case ("tool", name, args, result, failed):
                log.tool(
                    name,
                    {"target": f"t{args}", "flags": {"v": args}},
                    f"output {result}",
                    error_code="E" if failed else None,
                )
                log.next_step()
            case ("retry",):
                log.retry()
            case ("text", variant):
                log.assistant(f"I will now continue with plan number {variant}.")
            case ("user", kind):
                log.user("message", kind=kind)
            case ("compaction",):
                log.compaction()
            case ("header", tools):
                log.request_header(tools)
                log.assistant("")
            case ("bloat",):
                tools += 1
                log.request_header(tools)
                log.assistant("")
            case ("cycle", width, repeats):
                for _ in range(repeats):
                    for name in ("read", "bash", "grep", "edit")[:width]:
                        log.tool(name, {"target": "same"}, "same output")
                        log.next_step()
            case ("marker",):
                log.add("subagent/catalog", {"childId": "c"})
    if actions and actions[-1] != ("turn",):
        log.end_turn()
    return log.events


@settings(max_examples=150, deadline=None)
@given(st.lists(ACTIONS, max_size=40), st.data(), CONFIGS)
def test_folding_a_prefix_then_the_rest_equals_one_shot(actions, data, config) -> None:
    events = build(actions)
    split = data.draw(st.integers(0, len(events)))
    one_shot = analyze_log(events, "s", config)

    analysis = SessionAnalysis("s", config)
    head = [s for e in events[:split] for s in analysis.feed(e)]
    resumed = copy.deepcopy(analysis)  # a checkpoint carries everything the fold needs
    for fold in (analysis, resumed):
        tail = [s for e in events[split:] for s in fold.feed(e)]
        assert head + tail + fold.finish() == one_shot


@settings(max_examples=100, deadline=None)
@given(st.lists(ACTIONS, max_size=40), CONFIGS)
def test_replaying_twice_gives_identical_output_and_sound_signals(actions, config) -> None:
    events = build(actions)
    first = analyze_log(events, "s", config)
    assert analyze_log(copy.deepcopy(events), "s", config) == first
    assert [s.to_dict() for s in first] == [s.to_dict() for s in analyze_log(events, "s", config)]
    keys = [s.key for s in first]
    assert len(keys) == len(set(keys))
    assert all(signal.metric >= 1 for signal in first)


@settings(max_examples=100, deadline=None)
@given(st.lists(ACTIONS, max_size=40), CONFIGS)
def test_evidence_is_event_seqs_in_log_order_at_most_max_evidence(actions, config) -> None:
    events = build(actions)
    seqs = {e["seq"] for e in events}
    for signal in analyze_log(events, "s", config):
        assert set(signal.evidence) <= seqs
        assert list(signal.evidence) == sorted(set(signal.evidence))
        assert len(signal.evidence) <= config.maxEvidence


JSON_LEAF = st.one_of(st.integers(-5, 5), st.text(max_size=4), st.booleans(), st.none())
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def reordered(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every object's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: reordered(value[k], rnd) for k in keys}
    if isinstance(value, list):
        return [reordered(v, rnd) for v in value]
    return value


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.text(max_size=5), JSON_VALUE, min_size=2, max_size=6),
    st.integers(3, 9),
    st.randoms(use_true_random=False),
)
def test_key_order_of_arguments_never_splits_a_run(arguments, count, rnd) -> None:
    log = SessionBuilder()
    log.start_turn()
    for _ in range(count):
        log.next_step()
        log.tool("edit", reordered(arguments, rnd), "unchanged")
    log.end_turn()
    signals = analyze_log(log.events, "s")
    assert [(s.kind, s.sub, s.metric) for s in signals] == [("retry-storm", "repeat:edit", count)]
    calls = tuple(e["seq"] for e in log.events if e["type"] == "tool/call")
    assert signals[0].evidence == calls
