"""The rescue engine on real corpus texts, fed event by event (no I/O)."""

from __future__ import annotations

import gc
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from tests.paths import CORPUS, SMOLLM2

from looprescue.config import NULL, LoopRescueConfig, load_config
from looprescue.detect import scan_text
from looprescue.rescue.budget import estimate_tokens
from looprescue.rescue.conversation import ConversationState
from looprescue.rescue.engine import RescueEngine, applies_to
from looprescue.rescue.events import (
    AuditRecord,
    BlockStarted,
    BlockStopped,
    CloseUpstream,
    EmitBlockStart,
    EmitBlockStop,
    EmitDelta,
    EmitError,
    EmitFinish,
    EmitMarker,
    EmitMessageStart,
    EmitSignature,
    FinishReported,
    MessageEnded,
    MessageStarted,
    ReasoningDelta,
    ResumeTimedOut,
    SaveConversation,
    SendRequest,
    SignatureDelta,
    TextDelta,
    ToolArgsDelta,
    UpstreamFailed,
    Usage,
    UsageReported,
)
from looprescue.wire.anthropic import AnthropicWire

REQUEST = {
    "model": "deepseek-flash",
    "stream": True,
    "messages": [{"role": "user", "content": [{"type": "text", "text": "Explain the loader."}]}],
    "dsh_session_log": {"version": 1, "events": []},
    "dsh_plugin_packages": {"version": 1, "packages": []},
}


# an answer that re-emits its opening paragraph from char 838 on
PARAGRAPH_LOOP = "smollm2-en-explain-tcp-t0"


@cache
def corpus(path: Path = CORPUS) -> tuple[dict[str, Any], ...]:
    with path.open(encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle if line.strip())


def record(record_id: str) -> dict[str, Any]:
    return next(r for r in corpus() + corpus(SMOLLM2) if r["id"] == record_id)


def detected_loops() -> list[dict[str, Any]]:
    """Corpus loop records the detector confirms on the whole text."""
    return [r for r in corpus() if r["label"] == "loop" and scan_text(r["text"], r["channel"])]


def normal_records() -> list[dict[str, Any]]:
    return [r for r in corpus() if r["label"] == "normal"]


def chunks(text: str, seed: int, low: int = 1, high: int = 9) -> list[str]:
    rng = random.Random(seed)
    out, position = [], 0
    while position < len(text):
        size = rng.randint(low, high)
        out.append(text[position : position + size])
        position += size
    return out


@dataclass
class Script:
    """One upstream response, as engine events."""

    reasoning: str = ""
    text: str = ""
    tools: Sequence[tuple[str, str, str]] = ()  # (id, name, arguments json)
    signature: str | None = "sig-1"
    seed: int = 0
    stop: str = "end_turn"
    output_tokens: int = 7

    def events(self, message_id: str = "msg_1") -> list[Any]:
        events: list[Any] = [MessageStarted(message_id, "deepseek-flash", Usage(176, 0, 1024, 0))]
        index = 0
        if self.reasoning:
            events.append(BlockStarted(index, "reasoning"))
            events += [ReasoningDelta(index, p) for p in chunks(self.reasoning, self.seed)]
            if self.signature:
                events.append(SignatureDelta(index, self.signature))
            events.append(BlockStopped(index))
            index += 1
        if self.text:
            events.append(BlockStarted(index, "text"))
            events += [TextDelta(index, p) for p in chunks(self.text, self.seed + 1)]
            events.append(BlockStopped(index))
            index += 1
        for tool_id, name, arguments in self.tools:
            events.append(BlockStarted(index, "tool_call", tool_id, name))
            events += [ToolArgsDelta(index, p) for p in chunks(arguments, self.seed + 2)]
            events.append(BlockStopped(index))
            index += 1
        reason = {"end_turn": "stop", "tool_use": "tool_calls"}.get(self.stop, "other")
        events += [
            UsageReported(Usage(output_tokens=self.output_tokens)),
            FinishReported(reason, self.stop),  # type: ignore[arg-type]
            MessageEnded(),
        ]
        return events


@dataclass
class Run:
    items: list[Any] = field(default_factory=list)
    resumes: list[SendRequest] = field(default_factory=list)
    closes: int = 0
    audit: list[AuditRecord] = field(default_factory=list)

    def client(self) -> list[Any]:
        return [
            i
            for i in self.items
            if not isinstance(i, CloseUpstream | SendRequest | SaveConversation | AuditRecord)
        ]

    def content(self, kind: str, markers: bool = False) -> str:
        types = (EmitDelta, EmitMarker) if markers else (EmitDelta,)
        return "".join(i.text for i in self.items if isinstance(i, types) and i.kind == kind)

    def markers(self) -> list[EmitMarker]:
        return [i for i in self.items if isinstance(i, EmitMarker)]

    def finishes(self) -> list[EmitFinish]:
        return [i for i in self.items if isinstance(i, EmitFinish)]


def run(
    engine: RescueEngine, first: Iterable[Any], continuations: Sequence[Iterable[Any]] = ()
) -> Run:
    """Drive the engine like an adapter: stop feeding a stream when told to close it, and feed
    the next scripted continuation when a resume starts."""
    result = Run()
    pending = list(continuations)
    stream: Iterable[Any] | None = first
    while stream is not None:
        current, stream = stream, None
        for event in current:
            out = engine.feed(event)
            result.items += out
            result.audit += [o for o in out if isinstance(o, AuditRecord)]
            if any(isinstance(o, CloseUpstream) for o in out):
                result.closes += 1
            resumes = [o for o in out if isinstance(o, SendRequest)]
            if resumes:
                result.resumes += resumes
                stream = pending.pop(0) if pending else None
                break
            if any(isinstance(o, CloseUpstream) for o in out) or engine.done:
                break
    return result


def engine_for(config: LoopRescueConfig | None = None, **kwargs: Any) -> RescueEngine:
    return RescueEngine(config or LoopRescueConfig(), AnthropicWire(), REQUEST, **kwargs)


def check_well_formed(result: Run) -> None:
    """One message start, blocks opened once and closed once in order, one terminal item."""
    client = result.client()
    assert isinstance(client[0], EmitMessageStart)
    assert sum(isinstance(i, EmitMessageStart) for i in client) == 1
    terminal = [i for i in client if isinstance(i, EmitFinish | EmitError)]
    assert len(terminal) == 1 and client[-1] is terminal[0]
    opened: list[int] = []
    open_now: set[int] = set()
    for item in client:
        if isinstance(item, EmitBlockStart):
            assert item.index not in opened
            opened.append(item.index)
            open_now.add(item.index)
        elif isinstance(item, EmitDelta | EmitMarker | EmitSignature):
            assert item.index in open_now
        elif isinstance(item, EmitBlockStop):
            assert item.index in open_now
            open_now.remove(item.index)
    assert opened == list(range(len(opened)))
    if isinstance(terminal[0], EmitFinish):
        assert not open_now  # an in-band error may end the stream inside a block


# --------------------------------------------------------------------------- healthy streams


@pytest.mark.parametrize("rec", normal_records(), ids=lambda r: r["id"])
def test_healthy_corpus_text_passes_unchanged(rec: dict[str, Any]) -> None:
    script = Script(
        reasoning=rec["text"] if rec["channel"] == "reasoning" else "Let me think.",
        text=rec["text"] if rec["channel"] == "text" else "Here it is.",
        tools=[("toolu_1", "read", '{"file_path": "a.txt"}')],
        stop="tool_use",
    )
    engine = engine_for()
    result = run(engine, script.events())
    check_well_formed(result)
    assert result.content("reasoning") == script.reasoning
    assert result.content("text") == script.text
    assert result.content("tool_call") == '{"file_path": "a.txt"}'
    assert not result.markers() and not result.resumes and result.closes == 0
    assert [i.signature for i in result.items if isinstance(i, EmitSignature)] == ["sig-1"]
    (finish,) = result.finishes()
    assert finish.raw_reason == "tool_use" and finish.usage.output_tokens == 7
    assert engine.stats.detections == 0 and engine.stats.released_chars == len(
        script.reasoning + script.text
    )


def test_text_is_released_as_soon_as_the_detector_clears_it() -> None:
    """Plain prose is not held back: after each delta, nearly everything fed is out."""
    prose = record("smollm2-en-explain-tcp-t0.8")["text"]
    engine = engine_for()
    engine.feed(MessageStarted("m", "x"))
    engine.feed(BlockStarted(0, "text"))
    fed = released = 0
    lags = []
    for piece in chunks(prose, 3):
        out = engine.feed(TextDelta(0, piece))
        fed += len(piece)
        released += sum(len(i.text) for i in out if isinstance(i, EmitDelta))
        lags.append(fed - released)
    assert released + lags[-1] == len(prose)
    assert max(lags) == engine.stats.max_held_chars
    assert max(lags) < len(prose) // 10


# --------------------------------------------------------------------------- loops


@pytest.mark.parametrize("rec", detected_loops(), ids=lambda r: r["id"])
def test_loop_is_pruned_and_resumed_without_leaking(rec: dict[str, Any]) -> None:
    (hit,) = scan_text(rec["text"], rec["channel"])
    loop_in_reasoning = rec["channel"] == "reasoning"
    script = Script(
        reasoning=rec["text"] if loop_in_reasoning else "I will answer.",
        text=rec["text"] if not loop_in_reasoning else "Never sent.",
    )
    continuation = Script(reasoning="Continuing cleanly.", text="The loader merges layers.")
    engine = engine_for()
    result = run(engine, script.events(), [continuation.events("msg_2")])
    check_well_formed(result)
    channel = rec["channel"]
    kept = result.content(channel)
    if loop_in_reasoning:
        assert kept == hit_prefix(rec, hit) + continuation.reasoning
        assert result.content("text") == continuation.text
    else:
        assert kept == hit_prefix(rec, hit) + continuation.text
    # No character past the prune point reached the client, per the engine's own count too.
    assert engine.stats.leaked_loop_chars == 0
    assert len(result.resumes) == 1 and result.closes == 1
    (marker,) = result.markers()
    assert "removed" in marker.text and marker.kind == channel
    (finish,) = result.finishes()
    assert finish.raw_reason == "end_turn"
    # the cut attempt never reported its output tokens: what it streamed up to the cut is
    # counted, with the continuation's own count (the client pays for both)
    streamed = estimate_tokens(rec["text"][: hit.fired_at])
    assert finish.usage.output_tokens >= continuation.output_tokens + streamed


def hit_prefix(rec: dict[str, Any], hit: Any) -> str:
    return rec["text"][: hit.prune_offset]


def test_continuation_streams_into_new_client_blocks_with_one_finish() -> None:
    loop = record("mrwei-bleed-27361")["text"]
    engine = engine_for()
    result = run(
        engine,
        Script(reasoning=loop, text="x").events(),
        [Script(reasoning="Fresh start.", text="Answer.", signature="sig-2").events("msg_2")],
    )
    check_well_formed(result)
    starts = [(i.index, i.kind) for i in result.items if isinstance(i, EmitBlockStart)]
    assert starts == [(0, "reasoning"), (1, "reasoning"), (2, "text")]
    # the pruned block carries no signature; the continuation's own block keeps its own
    assert [(i.index, i.signature) for i in result.items if isinstance(i, EmitSignature)] == [
        (1, "sig-2")
    ]
    assert sum(isinstance(i, EmitMessageStart) for i in result.items) == 1


def test_resume_request_is_the_original_plus_kept_work_and_a_correction() -> None:
    rec = record(PARAGRAPH_LOOP)
    (hit,) = scan_text(rec["text"], "text")
    engine = engine_for()
    result = run(engine, Script(reasoning="Plan: answer.", text=rec["text"]).events(), [])
    (resume,) = result.resumes
    body = resume.body
    assert "dsh_session_log" not in body and "dsh_plugin_packages" not in body
    messages = body["messages"]
    assert messages[0] == REQUEST["messages"][0]
    assert messages[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": rec["text"][: hit.prune_offset]}],
    }
    correction = messages[2]["content"][0]["text"]
    # nothing of the loop's text goes back upstream, not even its first phrase
    loop = " ".join(rec["text"][hit.loop_start :].split())
    flat = " ".join(correction.split())
    assert not any(loop[i : i + 16] in flat for i in range(len(loop) - 15))
    assert "without repeating" in correction and "stop when the answer is complete" in correction
    assert "workspace" not in correction  # the request has no tools
    assert "Plan: answer." in correction  # kept reasoning is quoted
    assert engine.conversation.consecutive_rescues == 0  # not finished yet
    assert resume.attempt == 1


def test_cut_mode_prunes_and_finishes_without_resuming() -> None:
    rec = record("mrwei-bleed-27438")
    (hit,) = scan_text(rec["text"], "reasoning")
    engine = engine_for(load_config(None, {"mode": "cut"}))
    result = run(engine, Script(reasoning=rec["text"], text="unused").events())
    check_well_formed(result)
    assert not result.resumes and result.closes == 1
    assert result.content("reasoning") == rec["text"][: hit.prune_offset]
    assert result.finishes()[0].reason == "stop"
    assert engine.stats.cuts == 1 and engine.stats.rescues == 0


def test_observe_mode_passes_everything_and_records_the_detection() -> None:
    rec = record("mrwei-bleed-27438")
    engine = engine_for(load_config(None, {"mode": "observe"}))
    result = run(engine, Script(reasoning=rec["text"], text="answer").events())
    check_well_formed(result)
    assert result.content("reasoning") == rec["text"]
    assert result.content("text") == "answer"
    assert engine.stats.max_held_chars == 0
    (detection,) = [a for a in result.audit if a.kind == "detection"]
    assert detection.data["rule"] == "pool" and detection.data["loop_text"]
    assert not result.resumes and result.closes == 0


def test_marker_off_and_all_loop_block_never_opens_an_empty_block() -> None:
    loop = record("smollm2-zh-list-interview-40-t0")["text"]
    (hit,) = scan_text(loop, "reasoning")
    assert hit.prune_offset > 0
    engine = engine_for(load_config(None, {"marker": False, "mode": "cut"}))
    result = run(engine, Script(reasoning=loop[hit.prune_offset :]).events())
    check_well_formed(result)
    # whatever was kept is exactly a prefix; no marker; no empty block was opened
    starts = [i for i in result.items if isinstance(i, EmitBlockStart)]
    for start in starts:
        assert any(
            isinstance(i, EmitDelta | EmitMarker) and i.index == start.index for i in result.items
        )
    assert not [m for m in result.markers() if m.kind == "reasoning"]


def test_cut_mode_always_ends_with_visible_text_saying_what_happened() -> None:
    """A reasoning loop leaves no text: clients that show only the text would show nothing."""
    rec = record("mrwei-bleed-27438")
    for marker in (True, False):
        engine = engine_for(load_config(None, {"mode": "cut", "marker": marker}))
        result = run(engine, Script(reasoning=rec["text"], text="unused").events())
        check_well_formed(result)
        text = result.content("text", markers=True)
        assert "repeating itself in its reasoning" in text and "unused" not in text


def test_a_resume_after_text_opens_no_reasoning_block() -> None:
    """claude -p and Qwen Code print the text after the last reasoning block: a reasoning
    block after the text kept before a loop would hide that text."""
    rec = next(r for r in detected_loops() if r["channel"] == "text")
    engine = engine_for()
    continuation = Script(reasoning="Let me finish differently.", text="The rest.")
    result = run(engine, Script(text=rec["text"]).events(), [continuation.events("msg_2")])
    check_well_formed(result)
    assert result.content("text").endswith("The rest.")
    assert "finish differently" not in result.content("reasoning")
    client = result.client()
    first_text = next(
        n for n, i in enumerate(client) if isinstance(i, EmitDelta) and i.kind == "text"
    )
    assert not any(
        isinstance(i, EmitBlockStart | EmitDelta | EmitSignature)
        and getattr(i, "kind", "reasoning") == "reasoning"
        for i in client[first_text:]
    )
    # the hidden reasoning is not sent back in a later continuation either
    assert "finish differently" not in engine.kept_work().reasoning


def test_watch_text_lets_a_reasoning_loop_through() -> None:
    rec = record("mrwei-bleed-27438")
    engine = engine_for(load_config(None, {"watch": "text"}))
    result = run(engine, Script(reasoning=rec["text"], text="answer").events())
    assert result.content("reasoning") == rec["text"] and not result.resumes


def test_chinese_conversation_gets_a_chinese_marker() -> None:
    rec = record("mrwei-bleed-27361")
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), REQUEST, lang="zh")
    result = run(engine, Script(reasoning=rec["text"]).events(), [Script(text="好").events()])
    (marker,) = result.markers()
    assert "已删除" in marker.text and "重复推理" in marker.text
    assert "重复" in result.resumes[0].body["messages"][-1]["content"][-1]["text"]


# --------------------------------------------------------------------------- caps and counters


def test_consecutive_rescue_cap_cuts_with_a_visible_note() -> None:
    state = ConversationState(consecutive_rescues=3)
    rec = record("mrwei-bleed-27438")
    engine = engine_for(conversation=state)
    result = run(engine, Script(reasoning=rec["text"]).events())
    check_well_formed(result)
    assert not result.resumes and engine.stats.cap_stops == 1
    note = result.markers()[-1]
    assert note.kind == "text" and "3 automatic resumes" in note.text
    assert state.consecutive_rescues == 3  # a looping response does not reset the count


def test_rescue_counts_accumulate_and_a_normal_response_resets_them() -> None:
    state = ConversationState()
    loop = record("mrwei-bleed-27438")["text"]
    for expected in (1, 2, 3):
        run(
            engine_for(conversation=state),
            Script(reasoning=loop).events(),
            [Script(text="ok").events()],
        )
        assert state.consecutive_rescues == expected
    result = run(engine_for(conversation=state), Script(reasoning=loop).events())
    assert not result.resumes  # capped
    run(engine_for(conversation=state), Script(text="A normal answer.").events())
    assert state.consecutive_rescues == 0


def test_a_loop_inside_the_continuation_is_rescued_again_until_the_cap() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    state = ConversationState()
    engine = engine_for(load_config(None, {"maxConsecutiveRescues": 2}), conversation=state)
    result = run(engine, Script(reasoning=loop).events(), [Script(reasoning=loop).events()] * 3)
    check_well_formed(result)
    assert len(result.resumes) == 2 and engine.stats.cap_stops == 1
    assert [r.attempt for r in result.resumes] == [1, 2]
    assert state.consecutive_rescues == 2
    assert engine.stats.leaked_loop_chars == 0


def test_retry_overrides_apply_to_the_first_retry_requests() -> None:
    config = load_config(
        None, {"retryTemperature": 0.3, "retryReasoningEffort": "high", "retryRequests": 2}
    )
    state = ConversationState()
    loop = record("mrwei-bleed-27438")["text"]
    result = run(engine_for(config, conversation=state), Script(reasoning=loop).events(), [])
    body = result.resumes[0].body
    assert body["temperature"] == 0.3 and body["output_config"] == {"effort": "high"}
    assert state.retry_requests_left == 1  # one more client request gets them
    assert state.take_retry_request() and not state.take_retry_request()


def test_overrides_set_to_null_leave_sampling_unchanged() -> None:
    config = load_config(None, {"retryTemperature": None, "retryFrequencyPenalty": None})
    # a plain None is a flag not given: the default is kept
    assert config.retryTemperature == LoopRescueConfig().retryTemperature is not None
    config = load_config(None, {"retryTemperature": NULL})
    loop = record("mrwei-bleed-27438")["text"]
    result = run(engine_for(config), Script(reasoning=loop).events(), [])
    body = result.resumes[0].body
    assert "temperature" not in body and "output_config" not in body
    # by default a resume is sampled at the default retry temperature
    result = run(engine_for(), Script(reasoning=loop).events(), [])
    assert result.resumes[0].body["temperature"] == LoopRescueConfig().retryTemperature


def budget_request(max_tokens: int) -> dict[str, Any]:
    return {**REQUEST, "max_tokens": max_tokens}


def test_a_resume_gets_what_is_left_of_the_clients_budget() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), budget_request(4000))
    result = run(engine, Script(reasoning=loop).events(), [Script(text="Done.").events()])
    left = result.resumes[0].body["max_tokens"]
    # the cut attempt streamed at least what the client kept, at most the whole text
    kept = next(r for r in result.audit if r.kind == "detection").data["kept_chars"]
    assert 4000 - estimate_tokens(loop) <= left <= 4000 - estimate_tokens(loop[:kept]) < 4000
    assert result.finishes()[-1].reason == "stop"


def test_a_loop_that_spent_the_budget_ends_as_the_budget_would() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), budget_request(60))
    result = run(engine, Script(reasoning=loop).events(), [Script(text="Done.").events()])
    assert not result.resumes and result.finishes()[-1].reason == "max_tokens"
    assert "60-token budget" in result.content("text", markers=True)
    check_well_formed(result)


def test_budget_estimate_errs_on_the_side_of_the_budget() -> None:
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2
    assert estimate_tokens("继续输出") == 8 and estimate_tokens("ab继续") == 5
    # a digit is a token of its own in most open models' vocabularies (SmolLM2 spends 132
    # tokens on "1. 第一种：序号：" and 120 ones; three ASCII chars a token would say 55)
    assert estimate_tokens("1. 2. 3. ") == 3 + 2 and estimate_tokens("序号：1111") == 6 + 4


def test_stall_streak_counts_reasoning_only_responses() -> None:
    state = ConversationState()
    config = load_config(None, {"stallMinReasoningChars": 10, "stallCalls": 2})
    thinking = "I am thinking about the layers and what they do."
    run(engine_for(config, conversation=state), Script(reasoning=thinking).events())
    assert state.stall_streak == 1 and not state.take_stall_nudge(2)
    run(engine_for(config, conversation=state), Script(reasoning=thinking).events())
    assert state.take_stall_nudge(2) and state.stall_streak == 0
    run(engine_for(config, conversation=state), Script(reasoning=thinking, text="ok").events())
    assert state.stall_streak == 0
    assert not ConversationState(stall_streak=9).take_stall_nudge(0)


# --------------------------------------------------------------------------- tool calls


def test_loop_while_a_tool_call_is_open_is_pruned_at_the_end_not_cut() -> None:
    """OpenAI-style interleaving: a tool call is streaming while the text loops."""
    loop = record(PARAGRAPH_LOOP)["text"]
    (hit,) = scan_text(loop, "text")
    engine = engine_for()
    events: list[Any] = [
        MessageStarted("m", "x"),
        BlockStarted(0, "tool_call", "call_1", "bash"),
        ToolArgsDelta(0, '{"command":'),
        BlockStarted(1, "text"),
        *[TextDelta(1, p) for p in chunks(loop, 5)],
        ToolArgsDelta(0, ' "ls"}'),
        BlockStopped(1),
        BlockStopped(0),
        FinishReported("tool_calls", "tool_calls"),
        MessageEnded(),
    ]
    result = run(engine, events)
    check_well_formed(result)
    assert result.closes == 0 and not result.resumes
    assert result.content("tool_call") == '{"command": "ls"}'
    assert result.content("text") == loop[: hit.prune_offset]
    (marker,) = result.markers()
    assert f"{len(loop) - hit.prune_offset} chars" in marker.text
    assert result.finishes()[0].raw_reason == "tool_calls"
    assert engine.stats.deferred_prunes == 1 and engine.stats.leaked_loop_chars == 0


def test_loop_after_a_finished_tool_call_cuts_and_finishes_with_tool_use() -> None:
    loop = record(PARAGRAPH_LOOP)["text"]
    engine = engine_for()
    events: list[Any] = [
        MessageStarted("m", "x"),
        BlockStarted(0, "tool_call", "toolu_1", "read"),
        ToolArgsDelta(0, '{"file_path": "a"}'),
        BlockStopped(0),
        BlockStarted(1, "text"),
        *[TextDelta(1, p) for p in chunks(loop, 5)],
        BlockStopped(1),
        MessageEnded(),
    ]
    result = run(engine, events)
    check_well_formed(result)
    assert result.closes == 1 and not result.resumes
    assert result.finishes()[0].reason == "tool_calls"


# --------------------------------------------------------------------------- faults


def test_resume_timeout_ends_with_an_error() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    engine = engine_for()
    result = run(engine, Script(reasoning=loop).events(), [[ResumeTimedOut(300000)]])
    check_well_formed(result)
    error = result.client()[-1]
    assert isinstance(error, EmitError) and "300000 ms" in error.message
    assert not result.finishes()
    assert engine.stats.resume_failures == 1


def test_resume_http_error_ends_with_that_error() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    engine = engine_for()
    failure = UpstreamFailed("http", "Overloaded", status=529, error_type="overloaded_error")
    result = run(engine, Script(reasoning=loop).events(), [[failure]])
    check_well_formed(result)
    # a failed resume is no finished answer: the client's retry policy must see the error
    assert result.client()[-1] == EmitError("http", "Overloaded", "overloaded_error", 529)
    assert not result.finishes()


def test_upstream_failure_mid_stream_is_an_error_and_held_text_is_not_released() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    events = Script(reasoning=loop).events()[:12]
    engine = engine_for()
    result = run(engine, [*events, UpstreamFailed("transport", "connection closed")])
    check_well_formed(result)
    assert isinstance(result.client()[-1], EmitError)
    released = result.content("reasoning")
    fed = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert fed.startswith(released) and len(released) <= len(fed)


def test_content_before_message_start_is_a_malformed_stream() -> None:
    engine = engine_for()
    (item,) = engine.feed(TextDelta(0, "hi"))
    assert isinstance(item, EmitError) and item.kind == "malformed" and engine.done
    assert engine.feed(MessageEnded()) == []


def test_stale_events_after_a_cut_are_ignored() -> None:
    loop = record("mrwei-bleed-27438")["text"]
    engine = engine_for()
    events = Script(reasoning=loop).events()
    result = run(engine, events, [])
    assert engine.state == "resuming"
    for event in events[-5:]:
        assert engine.feed(event) == []
    assert len(result.resumes) == 1


def test_model_filter_globs() -> None:
    config = load_config(None, {"models": ["deepseek-*", "qwen3"]})
    assert applies_to(config, "deepseek-flash") and applies_to(config, "qwen3")
    assert not applies_to(config, "gpt-4o") and not applies_to(config, None)
    assert applies_to(LoopRescueConfig(), "anything")


@pytest.mark.parametrize(
    "rec",
    [r for r in corpus() if not scan_text(r["text"], r["channel"])],
    ids=lambda r: r["id"],
)
def test_text_without_a_confirmed_loop_is_never_lost(rec: dict[str, Any]) -> None:
    """Held text is released in full when the stream ends without a confirmed loop (this
    includes loops too short for the detector: the proxy never drops unconfirmed text)."""
    channel = rec["channel"]
    script = Script(**{channel: rec["text"]}, seed=7)
    result = run(engine_for(), script.events())
    check_well_formed(result)
    assert result.content(channel) == rec["text"]
    assert not result.markers() and not result.resumes


def test_marker_sits_on_a_line_of_its_own() -> None:
    rec = record("mrwei-bleed-27438")
    (hit,) = scan_text(rec["text"], "reasoning")
    result = run(
        engine_for(load_config(None, {"mode": "cut"})), Script(reasoning=rec["text"]).events()
    )
    (marker,) = [m for m in result.markers() if m.kind == "reasoning"]
    kept = rec["text"][: hit.prune_offset]
    assert marker.text.endswith("〕\n")
    assert marker.text.startswith("\n") == (not kept.endswith("\n"))
    assert "\n" not in marker.text.strip("\n")


def counting_request(prompt: str, *earlier: dict[str, Any]) -> dict[str, Any]:
    return {**REQUEST, "messages": [*earlier, {"role": "user", "content": prompt}]}


COUNT = ", ".join(str(n) for n in range(1, 121))


def test_a_list_past_the_asked_range_is_cut_there_and_the_answer_finishes() -> None:
    body = counting_request("Print the numbers from 1 to 50.")
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), body)
    result = run(engine, Script(text=COUNT).events())
    check_well_formed(result)
    assert not result.resumes and result.closes == 1  # nothing to resume: the answer is whole
    assert result.content("text").endswith("48, 49, 50, ")
    assert result.finishes()[0].reason == "stop"
    assert engine.stats.leaked_loop_chars == 0 and engine.stats.rescues == 0
    cut = next(r for r in result.audit if r.kind == "cut")
    assert cut.data == {"channel": "text", "rule": "overrun", "action": "finish"}


def test_a_template_counted_on_unasked_is_cut_after_the_bound_and_finishes() -> None:
    ladder = "".join(f"    elif n == {i}:\n        return {i}\n" for i in range(1, 150))
    text = "```python\ndef fib(n):\n    if n == 0:\n        return 0\n" + ladder
    body = counting_request("Write a Python function that returns the nth Fibonacci number.")
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), body)
    result = run(engine, Script(text=text).events())
    check_well_formed(result)
    assert not result.resumes  # a continuation would only count on
    assert result.content("text").endswith("    elif n == 39:\n        return 39\n")
    assert engine.stats.leaked_loop_chars == 0
    cut = next(r for r in result.audit if r.kind == "cut")
    assert cut.data == {"channel": "text", "rule": "counted", "action": "finish"}


def test_a_template_counted_on_in_the_reasoning_is_cut_and_the_answer_still_comes() -> None:
    steps = "".join(f"Step {i}: Verify the result.\n" for i in range(5, 200))
    reasoning = "Solve it step by step.\nStep 1: 3x = 18.\nStep 2: x = 6.\n" + steps
    body = counting_request("Solve 3x + 7 = 25 and show your steps.")
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), body)
    result = run(
        engine,
        Script(reasoning=reasoning, text="x").events(),
        [Script(reasoning="x = 6.", text="x = 6", signature="sig-2").events("msg_2")],
    )
    check_well_formed(result)
    # the answer is still to come: a continuation, not a finish with the reasoning alone
    assert len(result.resumes) == 1
    assert result.content("text") == "x = 6"
    assert "Step 60:" not in result.content("reasoning")
    cut = next(r for r in result.audit if r.kind == "cut")
    assert cut.data == {"channel": "reasoning", "rule": "counted", "action": "resume"}


def test_after_a_tool_result_an_earlier_count_bounds_only_a_template() -> None:
    # the answer follows a tool result: the range asked before no longer marks where a list
    # must stop (overrun), but no count the user named was 120, so a bare count is a template
    # counted on past every count asked (counted)
    body = {
        **REQUEST,
        "messages": [
            {"role": "user", "content": "Print the numbers from 1 to 50."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
        ],
    }
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), body)
    result = run(engine, Script(text=COUNT).events())
    assert result.content("text").endswith(", 49, 50, ")
    cut = next(r for r in result.audit if r.kind == "cut")
    assert cut.data == {"channel": "text", "rule": "counted", "action": "finish"}
    shorter = ", ".join(str(n) for n in range(1, 56))  # five past 50: an overshoot, not a loop
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), body)
    result = run(engine, Script(text=shorter).events())
    assert result.content("text") == shorter and engine.stats.detections == 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_continuation_that_copies_its_correction_is_cut_there_and_finishes(lang: str) -> None:
    loop = record("mrwei-bleed-27361")["text"]
    prompt = "解释一下加载器。" if lang == "zh" else "Explain the loader."
    engine = RescueEngine(LoopRescueConfig(), AnthropicWire(), counting_request(prompt))
    first = run(engine, Script(reasoning=loop, text="x").events())
    (resume,) = first.resumes
    correction = resume.body["messages"][-1]["content"]
    correction = correction if isinstance(correction, str) else correction[-1]["text"]
    # the model writes one of the correction's sentences out instead of answering
    copied = max(re.split(r"(?<=[.!?])\s+|(?<=[。！？：])|\n+", correction), key=len)
    answer = "The loader reads the layers. " + copied + " " + copied
    second = run(engine, Script(reasoning="Continuing.", text=answer).events("msg_2"))
    shown = second.content("text")
    assert copied not in shown and shown.startswith("The loader reads the layers.")
    assert not second.resumes and second.finishes()[0].reason == "stop"
    assert engine.stats.leaked_loop_chars == 0
    cuts = [r.data for r in first.audit + second.audit if r.kind == "cut"]
    assert cuts[-1] == {"channel": "text", "rule": "parrot", "action": "finish"}


def test_a_continuation_may_use_the_corrections_short_phrases() -> None:
    loop = record("mrwei-bleed-27361")["text"]
    engine = engine_for()
    run(engine, Script(reasoning=loop, text="x").events())
    answer = "Continue the task. The loader merges layers; without repeating them it is fast."
    second = run(engine, Script(reasoning="Continuing.", text=answer).events("msg_2"))
    assert second.content("text") == answer and engine.stats.detections == 1


EMAIL_OPENING = (
    "Subject: Request for a Meeting\n\nDear Ms. Chen,\n\n"
    "I am writing to ask whether you could meet me next Tuesday to go over the budget.\n\n"
)


def test_a_continuation_that_restarts_the_answer_is_cut_at_its_start_and_finishes() -> None:
    engine = engine_for()
    looping = EMAIL_OPENING + "Keywords: Teamwork, Project Management, " * 40
    first = run(engine, Script(text=looping).events())
    assert len(first.resumes) == 1
    kept = first.content("text")
    assert kept.startswith(EMAIL_OPENING)
    # the continuation writes the email again from its first line
    second = run(engine, Script(text=EMAIL_OPENING + "Thank you.\n").events("msg_2"))
    assert second.content("text") == ""  # none of the restart reaches the client
    (marker,) = second.markers()
    assert re.fullmatch(r"〔\d+ chars of repeated text removed〕", marker.text.strip())
    assert not second.resumes and second.finishes()[0].reason == "stop"
    assert engine.stats.leaked_loop_chars == 0
    cuts = [r.data for r in first.audit + second.audit if r.kind == "cut"]
    assert cuts[-1] == {"channel": "text", "rule": "restate", "action": "finish"}


def test_a_continuation_that_picks_up_where_the_answer_stopped_goes_on() -> None:
    engine = engine_for()
    looping = EMAIL_OPENING + "Keywords: Teamwork, Project Management, " * 40
    run(engine, Script(text=looping).events())
    rest = "I would like to agree on the figures before the review on Friday.\n\nBest,\nTom\n"
    second = run(engine, Script(text=rest).events("msg_2"))
    assert second.content("text") == rest and engine.stats.detections == 1


@pytest.mark.parametrize("mode", ["rescue", "observe"])
def test_a_finished_response_leaves_no_reference_cycles(mode: str) -> None:
    """An engine and its detectors are freed by reference counting as soon as the response is
    done: as cyclic garbage they would wait for the cycle collector, whose full passes walk
    the state of every stream in flight."""
    looping = EMAIL_OPENING + "Keywords: Teamwork, Project Management, " * 40
    rest = "I would like to agree on the figures before the review on Friday.\n"
    gc.collect()
    gc.disable()
    try:
        engine = engine_for(LoopRescueConfig(mode=mode))
        result = run(
            engine,
            Script(reasoning="Plan it.", text=looping).events(),
            [Script(text=rest).events("msg_2")],
        )
        assert engine.done and engine.stats.detections == 1
        del engine, result
        assert gc.collect() == 0
    finally:
        gc.enable()
