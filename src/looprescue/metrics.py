"""Prometheus metrics of the rescue, shared by the proxy, the SDK wrapper and the LiteLLM callback.

All names carry the ``looprescue_`` prefix; counters end in ``_total`` and histograms are in
seconds, as Prometheus names them. Everything is counted once per response (from the engine's
:class:`~looprescue.rescue.engine.RescueStats` when it ends), never per chunk, so the streaming
hot path does no metrics work.

One :class:`RescueMetrics` exists per registry: :func:`metrics_for` returns the process's own
for prometheus-client's default registry (so an application that already exposes that registry
shows these too), or the one bound to the registry it is given.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from .rescue.engine import RescueStats

# request durations of model calls: from a fraction of a second to many minutes
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, float("inf"))
FIRST_BYTE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf"))


class RescueMetrics:
    """The counters and histograms, registered in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = ("protocol",)) -> Counter:
            return Counter(f"looprescue_{name}", doc, labels, registry=registry)

        self.registry = registry
        self.responses = counter(
            "responses", "Responses of rescued routes.", ("protocol", "adapter")
        )
        self.detections = counter(
            "detections", "Loops the detector confirmed.", ("protocol", "rule", "channel")
        )
        self.rescues = counter("rescues", "Loops cut and resumed with a continuation.")
        self.cuts = counter("cuts", "Upstream streams cut at a confirmed loop.")
        self.cap_stops = counter(
            "cap_stops", "Loops not resumed: the conversation reached maxConsecutiveRescues."
        )
        self.resume_failures = counter(
            "resume_failures", "Continuations that failed or sent nothing in time."
        )
        self.rescue_rungs = counter(
            "rescue_rung",
            "Resumed responses by the retryLadder rung of their last continuation and how it"
            " ended (finished, cut, failed).",
            ("protocol", "rung", "outcome"),
        )
        self.pruned_chars = counter("pruned_chars", "Loop chars kept from the client.")
        self.kept_loop_chars = counter(
            "kept_loop_chars",
            "Loop chars that reached a client as the one copy a periodic loop keeps.",
        )
        self.leaked_loop_chars = counter(
            "leaked_loop_chars", "Loop chars past the prune point that reached a client."
        )
        self.history_chars = counter(
            "history_sanitized_chars",
            "Chars cut out of the history of requests before they went upstream.",
            ("protocol", "channel", "action"),
        )
        self.history_requests = counter(
            "history_sanitized_requests", "Requests whose history had something cut out."
        )
        self.upstream_errors = counter(
            "upstream_errors",
            "Upstream failures: the HTTP status, else the kind (connect, stall, transport, "
            "in_band, malformed, timeout).",
            ("protocol", "status"),
        )
        self.tool_loops = counter(
            "tool_loops",
            "Requests whose history ends in a tool loop, by loop kind (repeat, cycle, failure)"
            " and what the guard did (steer, stop, watch).",
            ("protocol", "adapter", "kind", "outcome"),
        )
        self.tool_loop_tokens = counter(
            "tool_loop_tokens",
            "Input tokens (estimated) of requests in tool loops: sent upstream (spent) or kept"
            " from it by a stop (saved).",
            ("protocol", "adapter", "outcome"),
        )
        self.tool_loop_dollars = counter(
            "tool_loop_dollars",
            "The same in dollars, for models with a price in toolGuard.inputPrices.",
            ("protocol", "adapter", "outcome"),
        )
        self.duration = Histogram(
            "looprescue_request_duration_seconds",
            "Time from a rescued request's start to the end of its response.",
            ("protocol",),
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.first_byte = Histogram(
            "looprescue_time_to_first_byte_seconds",
            "Time from a rescued request's start to the first bytes of its response.",
            ("protocol",),
            buckets=FIRST_BYTE_BUCKETS,
            registry=registry,
        )

    def response(
        self,
        protocol: str,
        adapter: str,
        stats: RescueStats,
        *,
        errors: list[str],
        duration_s: float,
        first_byte_s: float | None,
    ) -> None:
        """Count one response of a rescued route, however it ended."""
        self.responses.labels(protocol, adapter).inc()
        for hit in stats.hits:
            self.detections.labels(protocol, hit["rule"], hit["channel"]).inc()
        for name in ("rescues", "cuts", "cap_stops", "resume_failures"):
            value = getattr(stats, name)
            if value:
                getattr(self, name).labels(protocol).inc(value)
        if stats.rung_outcome:
            self.rescue_rungs.labels(protocol, stats.rung, stats.rung_outcome).inc()
        for name in ("pruned_chars", "kept_loop_chars", "leaked_loop_chars"):
            value = getattr(stats, name)
            if value:
                getattr(self, name).labels(protocol).inc(value)
        if stats.history_cuts:
            self.history_requests.labels(protocol).inc()
            for cut in stats.history_cuts:
                self.history_chars.labels(protocol, cut.channel, cut.action).inc(cut.removed_chars)
        for status in errors:
            self.upstream_errors.labels(protocol, status).inc()
        self.duration.labels(protocol).observe(duration_s)
        if first_byte_s is not None:
            self.first_byte.labels(protocol).observe(first_byte_s)

    def tool_loop(
        self,
        protocol: str,
        adapter: str,
        kind: str,
        outcome: str,
        tokens: tuple[int, int] = (0, 0),
        price: float | None = None,
    ) -> None:
        """Count one request the tool-loop guard judged a loop, and its (spent, saved) input
        tokens (dollars too when ``price``, per million tokens, is known)."""
        self.tool_loops.labels(protocol, adapter, kind, outcome).inc()
        for label, value in zip(("spent", "saved"), tokens, strict=True):
            if value:
                self.tool_loop_tokens.labels(protocol, adapter, label).inc(value)
                if price is not None:
                    self.tool_loop_dollars.labels(protocol, adapter, label).inc(value * price / 1e6)


_LOCK = threading.Lock()
_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, RescueMetrics] = (
    weakref.WeakKeyDictionary()
)


def metrics_for(registry: CollectorRegistry | None = None) -> RescueMetrics:
    """The metrics bound to ``registry`` (None: prometheus-client's default registry)."""
    target = REGISTRY if registry is None else registry
    with _LOCK:
        metrics = _BY_REGISTRY.get(target)
        if metrics is None:
            metrics = _BY_REGISTRY[target] = RescueMetrics(target)
        return metrics


def exposition(registry: CollectorRegistry | None = None) -> tuple[bytes, str]:
    """The text exposition of ``registry`` (None: the default one) and its content type."""
    target: Any = REGISTRY if registry is None else registry
    return generate_latest(target), CONTENT_TYPE_LATEST
