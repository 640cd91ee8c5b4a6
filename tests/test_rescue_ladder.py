"""The recovery ladder: which rung each continuation of a response takes, how each protocol
spells the lighter rung, and what the engine, the audit log and the metrics make of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import openai
import pytest
from prometheus_client import CollectorRegistry
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_response
from tests.test_metrics import samples, value
from tests.test_proxy_http import ProxyServer, loop_records
from tests.test_rescue_engine import REQUEST, Script, check_well_formed, record, run

from looprescue.config import ConfigError, LoopRescueConfig, load_config
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import AuditRecord, UpstreamFailed
from looprescue.rescue.ladder import rung_for, with_rung
from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire
from looprescue.wire.responses import ResponsesWire

# a reasoning loop the detector confirms: every attempt that streams it is cut
LOOP = "mrwei-bleed-27438"
THREE_RUNGS = {"retryLadder": ["sampling", "lighter", "model"], "retryModel": "strong-model"}


# --------------------------------------------------------------------------- the rung


@pytest.mark.parametrize(
    ("settings", "rungs"),
    [
        ({}, ["sampling", "lighter", "lighter", "lighter"]),
        (THREE_RUNGS, ["sampling", "lighter", "model", "model"]),
        ({"retryLadder": ["sampling"]}, ["sampling"] * 4),
        (
            {"retryLadder": ["lighter", "model"], "retryModel": "m"},
            ["lighter", "model", "model", "model"],
        ),
    ],
)
def test_each_resume_takes_the_next_rung_and_stays_on_the_last(
    settings: dict[str, Any], rungs: list[str]
) -> None:
    config = load_config(None, settings)
    assert [rung_for(config, resumes) for resumes in (1, 2, 3, 4)] == rungs


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"retryLadder": []}, "retryLadder: Value error, one rung or more"),
        ({"retryLadder": ["lighter", "sampling"]}, "retryLadder: Value error, one rung or more"),
        ({"retryLadder": ["sampling", "sampling"]}, "retryLadder: Value error, one rung or more"),
        ({"retryLadder": ["sampling", "slower"]}, "retryLadder.1: Input should be"),
        ({"retryLadder": ["sampling", "model"]}, "retryModel and the retryLadder rung model"),
        ({"retryModel": "strong-model"}, "retryModel and the retryLadder rung model"),
        ({**THREE_RUNGS, "retryModel": ""}, "retryModel: String should have at least 1"),
    ],
)
def test_a_wrong_ladder_is_a_config_error_naming_the_key(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, settings)


# --------------------------------------------------------------------------- body edits


def lighter(wire: Any, body: dict[str, Any]) -> dict[str, Any]:
    before = copy.deepcopy(body)
    out = wire.with_lighter_reasoning(body)
    assert body == before  # a new body; the one it was given is kept
    return out


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # budgeted thinking has no lower setting than off
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            {"thinking": {"type": "disabled"}},
        ),
        (
            {"thinking": {"type": "adaptive"}},
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}},
        ),
        (
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max", "x": 1}},
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "low", "x": 1}},
        ),
        ({"output_config": {"effort": "high"}}, {"output_config": {"effort": "low"}}),
        ({"thinking": {"type": "disabled"}}, {"thinking": {"type": "disabled"}}),
        ({}, {}),
    ],
)
def test_anthropic_lighter_reasoning(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    body = {**REQUEST, **fields}
    assert lighter(AnthropicWire(), body) == {**REQUEST, **expected}


OPENAI_REQUEST = {"model": "m", "messages": [{"role": "user", "content": "Explain."}]}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"reasoning_effort": "high"}, {"reasoning_effort": "low"}),
        ({"reasoning_effort": "xhigh"}, {"reasoning_effort": "low"}),
        # never raised to low
        ({"reasoning_effort": "minimal"}, {"reasoning_effort": "minimal"}),
        ({"reasoning_effort": "none"}, {"reasoning_effort": "none"}),
        # a model that does not reason rejects the field: none is added
        ({}, {}),
        ({"temperature": 0.7}, {"temperature": 0.7}),
        # DeepSeek's switch, as a top-level object
        ({"thinking": {"type": "enabled"}}, {"thinking": {"type": "disabled"}}),
        ({"thinking": {"type": "disabled"}}, {"thinking": {"type": "disabled"}}),
        # the same switch as other DeepSeek / Qwen hosts spell it
        ({"enable_thinking": True}, {"enable_thinking": False}),
        ({"enable_thinking": False}, {"enable_thinking": False}),
        (
            {"chat_template_kwargs": {"thinking": True, "other": 1}},
            {"chat_template_kwargs": {"thinking": False, "other": 1}},
        ),
        (
            {"chat_template_kwargs": {"enable_thinking": True}},
            {"chat_template_kwargs": {"enable_thinking": False}},
        ),
    ],
)
def test_openai_lighter_reasoning(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    body = {**OPENAI_REQUEST, **fields}
    assert lighter(OpenAIWire(), body) == {**OPENAI_REQUEST, **expected}


RESPONSES_REQUEST = {"model": "m", "input": "Explain.", "stream": True}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"reasoning": {"effort": "high", "summary": "auto"}},
            {"reasoning": {"effort": "low", "summary": "auto"}},
        ),
        # no effort: the API's default, medium
        ({"reasoning": {"summary": "auto"}}, {"reasoning": {"summary": "auto", "effort": "low"}}),
        ({"reasoning": {"effort": "minimal"}}, {"reasoning": {"effort": "minimal"}}),
        ({}, {}),
    ],
)
def test_responses_lighter_reasoning(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    body = {**RESPONSES_REQUEST, **fields}
    assert lighter(ResponsesWire(), body) == {**RESPONSES_REQUEST, **expected}


def test_the_model_rung_swaps_the_model_and_the_sampling_rung_changes_nothing() -> None:
    config = load_config(None, THREE_RUNGS)
    body = {**REQUEST, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    wire = AnthropicWire()
    assert with_rung(wire, body, "model", config) == {**body, "model": "strong-model"}
    assert with_rung(wire, body, "sampling", config) == body
    assert with_rung(wire, body, "lighter", config)["thinking"] == {"type": "disabled"}


# --------------------------------------------------------------------------- the engine


THINKING = {**REQUEST, "thinking": {"type": "enabled", "budget_tokens": 2048}}


def looping_run(config: LoopRescueConfig, loops: int, last: list[Any] | None = None) -> Any:
    """The client's request and ``loops`` - 1 continuations all loop; the next one answers
    (or ``last`` is what the upstream sends it)."""
    engine = RescueEngine(config, AnthropicWire(), THINKING)
    loop = record(LOOP)["text"]
    attempts = [Script(reasoning=loop, seed=n).events(f"msg_{n}") for n in range(loops)]
    answer = Script(reasoning="Short plan.", text="The loader merges layers.").events("msg_end")
    result = run(engine, attempts[0], [*attempts[1:], last if last is not None else answer])
    return engine, result


def audit_of(result: Any, kind: str) -> list[dict[str, Any]]:
    return [a.data for a in result.audit if isinstance(a, AuditRecord) and a.kind == kind]


def test_a_continuation_that_loops_again_goes_lighter() -> None:
    engine, result = looping_run(load_config(None), loops=2)
    check_well_formed(result)
    first, second = (request.body for request in result.resumes)
    # rung 1: the retry sampling, thinking as the client asked
    assert first["temperature"] == 0.2
    assert first["thinking"] == THINKING["thinking"]
    # rung 2: the same sampling, thinking off
    assert second["temperature"] == 0.2
    assert second["thinking"] == {"type": "disabled"}
    assert result.content("text") == "The loader merges layers."
    assert [r["rung"] for r in audit_of(result, "resume")] == ["sampling", "lighter"]
    assert audit_of(result, "rung") == [{"rung": "lighter", "resumes": 2, "outcome": "finished"}]
    assert (engine.stats.rung, engine.stats.rung_outcome) == ("lighter", "finished")


def test_the_model_rung_gets_the_clients_reasoning_on_the_retry_model() -> None:
    _, result = looping_run(load_config(None, THREE_RUNGS), loops=3)
    check_well_formed(result)
    bodies = [request.body for request in result.resumes]
    assert [b["model"] for b in bodies] == ["deepseek-flash", "deepseek-flash", "strong-model"]
    assert [b["thinking"]["type"] for b in bodies] == ["enabled", "disabled", "enabled"]
    assert audit_of(result, "rung") == [{"rung": "model", "resumes": 3, "outcome": "finished"}]


def test_a_response_without_a_resume_has_no_rung() -> None:
    engine = RescueEngine(load_config(None), AnthropicWire(), THINKING)
    result = run(engine, Script(reasoning="Plan.", text="Answer.").events())
    check_well_formed(result)
    assert audit_of(result, "rung") == [] and engine.stats.rung_outcome == ""


def test_the_rescue_cap_ends_the_ladder_on_a_cut() -> None:
    config = load_config(None, {"maxConsecutiveRescues": 2})
    _, result = looping_run(config, loops=3)
    check_well_formed(result)
    assert len(result.resumes) == 2
    assert audit_of(result, "rung") == [{"rung": "lighter", "resumes": 2, "outcome": "cut"}]


def test_a_failed_continuation_is_recorded_on_its_rung() -> None:
    failure = UpstreamFailed("http", "Overloaded", status=529, error_type="overloaded_error")
    engine, result = looping_run(load_config(None), loops=2, last=[failure])
    check_well_formed(result)
    assert audit_of(result, "rung") == [{"rung": "lighter", "resumes": 2, "outcome": "failed"}]
    assert engine.stats.rung_outcome == "failed"


# --------------------------------------------------------------------------- over HTTP


def test_the_ladder_over_http_with_audit_and_metrics(
    scripted_upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """A real openai client asks for high reasoning effort; the answer loops, its continuation
    loops again, and the second continuation goes up with effort low and finishes."""
    loop = next(r for r in loop_records() if r["channel"] == "reasoning")
    answer = ScriptedResponse(reasoning="Short plan.", text="Final answer.")
    scripted_upstream.enqueue(corpus_response(loop), corpus_response(loop, seed=1), answer)
    audit = tmp_path / "audit.jsonl"
    config = load_config(None, {"proxy.auditLog": str(audit)})
    registry = CollectorRegistry()
    with ProxyServer(config, scripted_upstream.base_url, metrics_registry=registry) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url + "/v1", api_key="k", max_retries=0)
        stream = client.chat.completions.create(
            model="deepseek-chat",
            messages=[{"role": "user", "content": "Explain the loader."}],
            reasoning_effort="high",
            stream=True,
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        found = samples(proxy)
    assert text == "Final answer."
    sent = [r.body for r in scripted_upstream.agent_requests()]
    assert [b["reasoning_effort"] for b in sent] == ["high", "high", "low"]
    assert [b.get("temperature") for b in sent] == [None, 0.2, 0.2]
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [line["rung"] for line in lines if line["kind"] == "resume"] == ["sampling", "lighter"]
    (ended,) = [line for line in lines if line["kind"] == "rung"]
    assert (ended["rung"], ended["resumes"], ended["outcome"]) == ("lighter", 2, "finished")
    rungs = {"protocol": "openai", "outcome": "finished"}
    assert value(found, "looprescue_rescue_rung_total", **rungs, rung="lighter") == 1
    assert value(found, "looprescue_rescue_rung_total", **rungs, rung="sampling") == 0
    assert value(found, "looprescue_rescues_total", protocol="openai") == 2
