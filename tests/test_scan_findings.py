"""The scan unit (pure): loops per block, failed attempts without double counting, narration."""

from __future__ import annotations

from tests.paths import SESSIONS

from looprescue.config import LoopRescueConfig
from looprescue.dsh import open_log
from looprescue.dsh.findings import SessionScanner, scan_events
from looprescue.dsh.narration import NarrationTracker
from looprescue.dsh.records import record_of

LOOP_TEXT = "Sessions live under $DSH_HOME/sessions. " * 20
CLEAN_TEXT = "The loader merges the bundle, profile, home and patch layers in that order."


def loops_of(scenario: str) -> list:
    log = open_log(SESSIONS / scenario / "session" / "session.v4.jsonl.zstd")
    return [f for f in scan_events(log.events(), log.session_id, "x") if f.is_loop]


def test_reasoning_pool_loop_in_a():
    [finding] = loops_of("a_reasoning_loop")
    assert (finding.kind, finding.source, finding.channel) == ("loop", "message", "reasoning")
    assert (finding.turn, finding.step, finding.seq, finding.block) == (1, 1, 17, 0)
    # "Now. OK. Emit. Producing." is a rotation of short phrases (exactly periodic here):
    # it is cut where its first phrase appeared, keeping the 306-char preamble and no phrase
    assert finding.rule == "cycle"
    assert finding.loop_start == finding.prune_offset == 307
    assert finding.chars == 5107
    assert finding.loop_chars == 5107 - finding.prune_offset
    assert finding.excerpt.startswith("Now. OK. Emit.")


def test_verbatim_cycle_in_b():
    [finding] = loops_of("b_verbatim_cycle")
    assert (finding.channel, finding.rule, finding.period, finding.seq) == (
        "text",
        "cycle",
        121,
        17,
    )
    assert finding.loop_chars >= 121 * 8


def test_stream_cut_counts_each_cycle_once():
    # The message repeats a 45-char sentence 8 times in its reasoning and a 40-char one 20 times
    # in its text; the failed attempt's partial reasoning (under 5 copies) is no finding.
    findings = loops_of("h_stream_cut")
    assert [(f.source, f.channel, f.rule, f.period) for f in findings] == [
        ("message", "reasoning", "cycle", 45),
        ("message", "text", "cycle", 40),
    ]


def test_reasoning_loop_in_second_turn_of_j():
    [finding] = loops_of("j_openai_compat_provider")
    assert (finding.turn, finding.step, finding.channel, finding.seq) == (2, 1, "reasoning", 32)


def test_healthy_sessions_have_no_findings():
    for scenario in ("g_healthy_long_answer", "k_python_sdk_run", "d_tool_loop", "f_retry_storm"):
        assert loops_of(scenario) == [], scenario


def test_misses_cover_every_scanned_block():
    log = open_log(SESSIONS / "g_healthy_long_answer" / "session" / "session.v4.jsonl.zstd")
    findings = list(scan_events(log.events(), log.session_id, "x"))
    assert [(f.kind, f.channel) for f in findings] == [("miss", "reasoning"), ("miss", "text")]
    assert findings[1].chars == 1401


def _attempt(seq: int, text: str) -> dict:
    start = {"type": "block-start", "index": 0, "blockType": "text"}
    pieces = [text[i : i + 10] for i in range(0, 800, 10)]
    stream = [
        {"type": "chunk", "time": 1, "chunk": start},
        {"type": "text-chunks", "time0": 1, "index": 0, "dt": [0] * 79, "texts": pieces},
        {"type": "chunk", "time": 2, "chunk": {"type": "finish", "reason": {"kind": "error"}}},
    ]
    return {"type": "assistant/attempt", "seq": seq, "time": 1,
            "data": {"turn": 1, "step": 1, "stream": stream}}  # fmt: skip


def _message(seq: int, text: str, turn: int = 1, step: int = 1) -> dict:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return {"type": "assistant/message", "seq": seq, "time": 2,
            "data": {"turn": turn, "step": step, "message": message}}  # fmt: skip


def _run(events: list[dict]) -> list:
    scanner = SessionScanner("s", "p")
    out = []
    for event in events:
        out.extend(scanner.feed(record_of(event)))
    out.extend(scanner.finish())
    return [f for f in out if f.is_loop]


def test_attempt_loop_repeated_by_the_message_counts_once():
    events = [_attempt(0, LOOP_TEXT), _message(1, LOOP_TEXT), {"type": "step/end", "seq": 2,
              "time": 3, "data": {"turn": 1, "step": 1}}]  # fmt: skip
    assert [(f.source, f.seq) for f in _run(events)] == [("message", 1)]


def test_attempt_loop_alone_is_reported_from_its_deltas():
    events = [_attempt(0, LOOP_TEXT), _message(1, CLEAN_TEXT)]
    [finding] = _run(events)
    assert (finding.source, finding.seq, finding.channel, finding.rule) == (
        "attempt",
        0,
        "text",
        "cycle",
    )
    assert finding.chars == 800


def test_narration_across_turns():
    events = [_message(i, CLEAN_TEXT, turn=i + 1) for i in range(3)]
    [finding] = _run(events)
    assert finding.kind == "narration"
    assert finding.seqs == (0, 1, 2) and (finding.turn, finding.last_turn) == (1, 3)


def test_narration_threshold_comes_from_config():
    config = LoopRescueConfig.model_validate({"doctor": {"narrationMinRepeats": 4}})
    scanner = SessionScanner("s", "p", config)
    for i in range(3):
        scanner.feed(record_of(_message(i, CLEAN_TEXT)))
    assert [f for f in scanner.finish() if f.is_loop] == []


def test_narration_tracker_rules():
    tracker = NarrationTracker(min_repeats=3, min_chars=10)
    assert tracker.observe(1, 1, "same  text here") is None
    assert tracker.observe(2, 1, "") is None  # a pure tool-call message neither extends nor breaks
    assert tracker.observe(3, 1, "same text\nhere") is None  # whitespace-insensitive
    assert tracker.observe(4, 2, "same text here") is None
    run = tracker.observe(5, 2, "something else entirely")
    assert run is not None and run.seqs == (1, 3, 4) and run.turns == (1, 1, 2)
    assert tracker.observe(6, 2, "short") is None
    assert tracker.finish() is None  # one message is not a run
    short = NarrationTracker(min_repeats=2, min_chars=10)
    short.observe(1, 1, "tiny")
    short.observe(2, 1, "tiny")
    assert short.finish() is None  # below min_chars


def _user(seq: int, text: str, kind: str = "user") -> dict:
    message = {
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": kind},
    }
    return {"type": "user/message", "seq": seq, "time": 0, "data": message}


# a template counted on far past the five rows asked for: the loop a small model writes
ROWS = "Here are the rows.\n\n" + "".join(
    f"INSERT INTO users VALUES ({n}, 'user{n}', 'user{n}@example.com');\n" for n in range(1, 91)
)


def test_the_request_before_a_message_bounds_its_counted_lists():
    asked = [_user(0, "Create a users table and add five sample rows."), _message(1, ROWS)]
    [finding] = _run(asked)
    assert finding.rule in {"counted", "overrun"}
    # the rows asked for stay, and a few past them at most
    kept = ROWS[: finding.prune_offset]
    assert "(5, 'user5'" in kept and "(48, 'user48'" not in kept


def test_without_what_the_human_asked_a_counted_list_is_left_alone():
    # no request, or a user message DSH wrote (a runtime-context snapshot) rather than the human
    assert _run([_message(1, ROWS)]) == []
    assert _run([_user(0, "Rows: add five.", kind="runtime-context"), _message(1, ROWS)]) == []
