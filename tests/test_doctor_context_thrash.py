"""context-thrash, statement by statement (docs/doctor.md, `context-thrash`)."""

from __future__ import annotations

from tests.test_doctor_helpers import SessionBuilder

from looprescue.config import DoctorConfig
from looprescue.doctor import SessionAnalysis, analyze_log
from looprescue.doctor.context_thrash import ContextThrashRule

ONE = {"compactionThreshold": 1, "injectThreshold": 1, "delegationThreshold": 1}


def counted(events: list[dict], header: dict | None = None) -> dict[str, tuple[int, ...]]:
    """sub -> evidence, every sub reported from its first event on."""
    signals = analyze_log(events, "s", ONE, header=header)
    return {s.sub: s.evidence for s in signals if s.kind == "context-thrash"}


def test_compaction_counts_compaction_passes_started_failed_passes_included() -> None:
    log = SessionBuilder()
    log.start_turn()
    starts = [log.compaction(), log.compaction(failed=True), log.compaction(failed=True)]
    log.end_turn()
    (signal,) = analyze_log(log.events, "s")
    assert (signal.kind, signal.sub, signal.turn, signal.metric) == (
        "context-thrash",
        "compaction",
        None,
        3,
    )
    assert signal.evidence == tuple(starts)  # the starts; compaction/end is not a pass


def test_inject_counts_user_messages_no_human_wrote() -> None:
    log = SessionBuilder()
    log.start_turn()
    log.next_step()
    log.user("Fix the build.")  # the human
    injected = [
        log.user("Current runtime context.", kind="runtime-context"),
        log.user("You are repeating the exact same tool call.", kind="repeat-tool-reminder"),
        log.user("Background subagent finished.", kind="subagent-settled"),
        log.user("Summary of the conversation so far.", kind="compact-checkpoint"),
        log.user("A plugin's note.", kind="plugin"),
    ]
    log.end_turn()
    assert counted(log.events) == {"inject": tuple(injected)}


def test_in_a_subagent_child_the_delegated_prompt_is_injected_too() -> None:
    log = SessionBuilder()
    log.start_turn()
    prompt = log.user("List the project files. (from the parent agent)")
    snapshot = log.user("Current runtime context.", kind="runtime-context")
    log.end_turn()
    child = dict(log.header, origin="subagent", delegationDepth=1, parentSession="session-p")
    assert counted(log.events, child)["inject"] == (prompt, snapshot)
    # a child is also known by its first event, whatever its header says
    described = [{"type": "subagent/descriptor", "seq": 99, "data": {}}, *log.events]
    assert counted(described)["inject"] == (prompt, snapshot)


def test_delegation_counts_subagent_descriptors_catalog_entries_and_hook_invocations() -> None:
    events = [
        {"type": "subagent/descriptor", "seq": 0, "data": {}},
        {"type": "subagent/catalog", "seq": 1, "data": {"childId": "c"}},
        {"type": "hook/invoked", "seq": 2, "data": {}},
        {"type": "hook/completed", "seq": 3, "ignorable": True, "data": {}},  # same hook again
        {"type": "subagent/other", "seq": 4, "ignorable": True, "data": {}},
    ]
    assert counted(events)["delegation"] == (0, 1, 2)


def test_each_sub_has_its_own_threshold_and_they_are_reported_in_order() -> None:
    config = DoctorConfig(compactionThreshold=1, injectThreshold=2, delegationThreshold=3)
    rule = ContextThrashRule(config)
    for seq in (1, 2, 3):
        rule.on_delegation_marker(seq)
    rule.on_injected_message(7)
    rule.on_injected_message(8)
    rule.on_compaction_start(9)
    signals = rule.finish()
    assert [(s.sub, s.metric, s.evidence) for s in signals] == [
        ("compaction", 1, (9,)),
        ("inject", 2, (7, 8)),
        ("delegation", 3, (1, 2, 3)),
    ]
    assert "delegationThreshold 3" in signals[2].explanation


def test_the_default_thresholds_are_3_compactions_15_injections_20_delegations() -> None:
    rule = ContextThrashRule(DoctorConfig())
    for seq in range(2):
        rule.on_compaction_start(seq)
    for seq in range(14):
        rule.on_injected_message(seq)
    for seq in range(19):
        rule.on_delegation_marker(seq)
    assert rule.finish() == []
    rule.on_compaction_start(2)
    rule.on_injected_message(14)
    rule.on_delegation_marker(19)
    assert [(s.sub, s.metric) for s in rule.finish()] == [
        ("compaction", 3),
        ("inject", 15),
        ("delegation", 20),
    ]


def test_metric_is_the_count_and_evidence_the_counted_events_capped() -> None:
    rule = ContextThrashRule(DoctorConfig(maxEvidence=2))
    for seq in (24, 29, 44, 49):
        rule.on_compaction_start(seq)
    (signal,) = rule.finish()
    assert (signal.metric, signal.evidence) == (4, (24, 29))


def test_context_thrash_is_session_level_and_emitted_at_the_end_of_the_log() -> None:
    log = SessionBuilder()
    for _ in range(3):
        log.start_turn()
        log.compaction()
        log.end_turn()
    analysis = SessionAnalysis("s")
    assert [s for e in log.events for s in analysis.feed(e)] == []
    (signal,) = analysis.finish()
    assert (signal.kind, signal.turn) == ("context-thrash", None)
