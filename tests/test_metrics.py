"""``GET /metrics`` and ``GET /healthz`` of the real proxy on 127.0.0.1, read with
prometheus-client's own text parser after rescued, healthy, failing and capped responses."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from openai import APIError
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream, corpus_response
from tests.test_proxy_http import (
    CONTINUATION,
    ProxyServer,
    loop_records,
    stream_anthropic,
    stream_openai,
)

from looprescue.config import load_config
from looprescue.detect import scan_text
from looprescue.metrics import metrics_for


def samples(proxy: ProxyServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(proxy.base_url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def upstream(scripted_upstream: ScriptedUpstream) -> ScriptedUpstream:
    return scripted_upstream


def test_metrics_after_a_rescued_and_a_healthy_stream(upstream: ScriptedUpstream) -> None:
    record = next(r for r in loop_records() if r["channel"] == "reasoning")
    (hit,) = scan_text(record["text"], "reasoning")
    registry = CollectorRegistry()
    upstream.enqueue(corpus_response(record), CONTINUATION)
    upstream.enqueue(ScriptedResponse(reasoning="Plan.", text="A healthy answer."))
    with ProxyServer(load_config(None), upstream.base_url, metrics_registry=registry) as proxy:
        rescued = stream_anthropic(proxy)
        healthy = stream_openai(proxy)
        found = samples(proxy)
    assert "〔" in rescued["reasoning"] and healthy["text"] == "A healthy answer."
    anthropic, openai = {"protocol": "anthropic"}, {"protocol": "openai"}
    assert value(found, "looprescue_responses_total", **anthropic, adapter="proxy") == 1
    assert value(found, "looprescue_responses_total", **openai, adapter="proxy") == 1
    assert (
        value(found, "looprescue_detections_total", **anthropic, rule=hit.rule, channel="reasoning")
        == 1
    )
    assert value(found, "looprescue_rescues_total", **anthropic) == 1
    assert value(found, "looprescue_cuts_total", **anthropic) == 1
    assert value(found, "looprescue_rescues_total", **openai) == 0
    assert value(found, "looprescue_pruned_chars_total", **anthropic) > 0
    assert value(found, "looprescue_leaked_loop_chars_total", **anthropic) == 0
    for protocol in (anthropic, openai):
        assert value(found, "looprescue_request_duration_seconds_count", **protocol) == 1
        assert value(found, "looprescue_time_to_first_byte_seconds_count", **protocol) == 1
        first_byte = value(found, "looprescue_time_to_first_byte_seconds_sum", **protocol)
        duration = value(found, "looprescue_request_duration_seconds_sum", **protocol)
        assert 0 < first_byte <= duration
    # the proxy's own endpoints never reach the upstream
    assert all(r.path != "/metrics" for r in upstream.requests)


def test_failures_caps_and_history_are_counted(upstream: ScriptedUpstream) -> None:
    loop = next(r for r in loop_records() if r["channel"] == "text")
    registry = CollectorRegistry()
    failing = ScriptedResponse(status=503)
    upstream.enqueue(corpus_response(loop), failing)  # the continuation fails
    upstream.enqueue(failing)  # the client's own request fails
    upstream.enqueue(corpus_response(loop))  # capped: no resume
    upstream.enqueue(ScriptedResponse(text="Done."))  # a history with a loop in it
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": loop["text"]},
        {"role": "user", "content": "again"},
    ]
    config = load_config(None, {"maxConsecutiveRescues": 0})
    with ProxyServer(load_config(None), upstream.base_url, metrics_registry=registry) as proxy:
        with pytest.raises(APIError, match="server_error"):
            stream_openai(proxy)  # the continuation's 503 ends the stream as an error
        with pytest.raises(Exception, match="503"):
            stream_openai(proxy)
    with ProxyServer(config, upstream.base_url, metrics_registry=registry) as capped:
        got = stream_openai(capped)
        assert "not resumed again" in got["text"]
        httpx.post(
            capped.base_url + "/v1/chat/completions",
            json={"model": "deepseek-chat", "messages": history},
        ).raise_for_status()
        found = samples(capped)
    openai = {"protocol": "openai"}
    assert value(found, "looprescue_responses_total", **openai, adapter="proxy") == 4
    assert value(found, "looprescue_resume_failures_total", **openai) == 1
    assert value(found, "looprescue_cap_stops_total", **openai) == 1
    assert value(found, "looprescue_cuts_total", **openai) == 2
    assert value(found, "looprescue_upstream_errors_total", **openai, status="503") == 2
    chars = value(
        found, "looprescue_history_sanitized_chars_total", **openai, channel="text", action="pruned"
    )
    (hit,) = scan_text(loop["text"], "text")
    assert chars == len(loop["text"]) - hit.prune_offset
    assert value(found, "looprescue_history_sanitized_requests_total", **openai) == 1


def test_healthz_and_the_default_registry(upstream: ScriptedUpstream) -> None:
    with ProxyServer(load_config(None), upstream.base_url) as proxy:
        health = httpx.get(proxy.base_url + "/healthz")
        exposed = httpx.get(proxy.base_url + "/metrics").text
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert "# TYPE looprescue_responses_total counter" in exposed
    assert metrics_for(None) is metrics_for(None)
    assert upstream.requests == []
