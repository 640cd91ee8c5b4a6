"""What every adapter of the rescue engine shares: the proxy, the SDK wrapper and the LiteLLM
callback each move bytes their own way, and all three judge a request, build its exchange and
account for it here, with one config, one set of conversation states, one history cache, one
audit log and one set of metrics.

:meth:`RescueService.judge` says whether a protocol request is rescued (None: it goes upstream
untouched; :class:`Rejected`: the protocol's 400). :meth:`RescueService.open` builds the engine,
the exchange and the driver of a rescued request and runs the engine's start (history
sanitization, stall nudge, retry overrides), off the event loop for a large body.
:meth:`RescueService.finished` counts the outcome.

The tool-loop guard (``looprescue/guard``) judges each prepared request's history here, so
every adapter applies it: a steered request goes upstream with the guard's note, a stopped one
is answered by the guard (``Rescue.stopped``) without calling the upstream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..config import LoopRescueConfig
from ..exchange.core import Exchange
from ..exchange.upstream import Transport, UpstreamError, response_headers
from ..guard import OUTCOME_HEADER, GuardVerdict, ToolGuard
from ..metrics import metrics_for
from ..rescue.attempt import LoopDetector
from ..rescue.conversation import conversation_key, conversation_language
from ..rescue.engine import RescueEngine, applies_to
from ..rescue.events import EmitError, SendRequest
from ..rescue.marker import Lang
from ..rescue.sanitize import HistoryCache
from ..wire import jsonfast
from ..wire.base import Wire
from .audit import AuditLog
from .driver import ExchangeDriver
from .state import StateStore, open_store

# Request bodies larger than this are parsed and serialized in a worker thread, and ones larger
# than START_OFF_LOOP_BYTES are started there (history sanitization reads the history's new
# texts at about 2 MB/s), so one long conversation does not hold up the event loop and every
# other stream on it.
LARGE_BODY_BYTES = 1 << 20
START_OFF_LOOP_BYTES = 16 << 10


@dataclass(frozen=True)
class Prepared:
    """A protocol request the engine acts on."""

    wire: Wire
    body: dict[str, Any]
    key: str  # the conversation ("": none, a first turn without a session identifier)
    lang: Lang


@dataclass(frozen=True)
class Rejected:
    """A protocol request whose body the engine cannot act on: the client gets a 400."""

    wire: Wire
    problem: str

    def error_body(self) -> bytes:
        message = f"invalid request body: {self.problem}"
        error = EmitError("malformed", message, "invalid_request_error")
        return jsonfast.dumps(self.wire.error_body(error))


@dataclass
class Answer:
    """What the client of a rescued request gets: a whole body, or a stream of body chunks."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    chunks: AsyncIterator[bytes] | None = None


@dataclass
class Rescue:
    """One rescued request: its engine, exchange and driver, and its first upstream request."""

    engine: RescueEngine
    exchange: Exchange
    driver: ExchangeDriver
    first: SendRequest
    content: bytes  # the first request's body bytes (the client's own when unchanged)
    adapter: str = "proxy"
    # failures of the first request the engine never saw: an HTTP error status passed to the
    # client as it came, or the upstream unreachable
    first_errors: list[str] = field(default_factory=list)
    finished: bool = False
    loop: GuardVerdict | None = None
    # the guard's answer to a stopped request (the upstream is not called)
    stopped: Answer | None = None

    async def answer(self, direct: Callable[[bytes], bool] | None = None) -> Answer:
        """Send the first request; the client's answer: the upstream's own HTTP error as it
        came (the client's retry policy keys off its status, headers and body), the rescued
        stream (to be read to its end or closed), or the rescued whole body. Raises
        ``UpstreamError`` when the upstream cannot be reached or breaks before the body.
        ``direct``: the client's immediate write, for the stream (``ExchangeDriver.stream``)."""
        if self.stopped is not None:
            return self.stopped
        answer = await self._answer(direct)
        if self.loop is not None and answer.status == 200:
            answer.headers[OUTCOME_HEADER] = self.loop.outcome
        return answer

    async def _answer(self, direct: Callable[[bytes], bool] | None) -> Answer:
        exchange, driver = self.exchange, self.driver
        try:
            upstream = await driver.send(self.first, self.content)
        except UpstreamError as err:
            self.first_errors.append(err.kind)
            raise
        headers = response_headers(upstream.headers, decoded=True)
        if exchange.passes_through(upstream.status):
            self.first_errors.append(str(upstream.status))
            return Answer(upstream.status, headers, await upstream.read())
        if exchange.streaming:
            headers["content-type"] = exchange.wire.stream_media_type
            headers.setdefault("cache-control", "no-cache")
            return Answer(200, headers, chunks=driver.stream(upstream, direct))
        status, payload = await driver.whole(upstream)
        if status != 200:
            headers = dict(exchange.error_headers)  # a failed continuation's Retry-After
        headers["content-type"] = "application/json"
        return Answer(status, headers, payload)


class RescueService:
    """Judges, builds and accounts for the rescued requests of one adapter."""

    def __init__(
        self,
        config: LoopRescueConfig,
        store: StateStore | None = None,
        *,
        detector_factory: Callable[[], LoopDetector] | None = None,
        history: HistoryCache | None = None,
        metrics_registry: Any = None,
    ) -> None:
        """``metrics_registry``: the prometheus-client registry counted into (None: the
        process's default registry)."""
        self.config = config
        self.store = store if store is not None else open_store(None, config.proxy.maxConversations)
        self.audit = AuditLog(config.proxy.auditLog)  # logs each record; the file is opt-in
        self.history = history if history is not None else HistoryCache()
        self.detector_factory = detector_factory
        self.metrics = metrics_for(metrics_registry)
        self.guard = ToolGuard(config)

    async def aclose(self) -> None:
        await self.store.aclose()
        if self.audit is not None:
            self.audit.close()

    # ------------------------------------------------------------------ judging

    async def judge(
        self, wire_class: type[Wire], headers: Mapping[str, str], raw: bytes
    ) -> Prepared | Rejected | None:
        """:meth:`judge_now`, in a worker thread for a large body."""
        if len(raw) > LARGE_BODY_BYTES:
            return await anyio.to_thread.run_sync(self.judge_now, wire_class, headers, raw)
        return self.judge_now(wire_class, headers, raw)

    def judge_now(
        self, wire_class: type[Wire], headers: Mapping[str, str], raw: bytes
    ) -> Prepared | Rejected | None:
        """Parse and judge a protocol request body: None when it goes upstream untouched (not
        JSON: the upstream judges it), :class:`Rejected` for a body the engine cannot act on,
        else what the exchange needs."""
        try:
            body = jsonfast.loads(raw)
        except ValueError:
            return None
        return self.judge_body(wire_class, headers, body)

    def judge_body(
        self, wire_class: type[Wire], headers: Mapping[str, str], body: Any
    ) -> Prepared | Rejected | None:
        if not isinstance(body, dict):
            return Rejected(wire_class(), "request body must be a JSON object")
        wire = wire_class(body)
        model = body.get("model")
        if not applies_to(self.config, model if isinstance(model, str) else None):
            return None
        problem = wire.request_problem(body)
        if problem is not None:
            return Rejected(wire, problem)
        if not wire.rescues(body):
            return None
        view = wire.conversation_view(body)  # the request as messages, in any protocol
        key = conversation_key(headers, view, wire.name) or ""
        lang = conversation_language(view, self.config.language)
        return Prepared(wire, body, key, lang)

    # ------------------------------------------------------------------ building

    async def open(
        self,
        prepared: Prepared,
        transport: Transport,
        url: str,
        headers: Sequence[tuple[str, str]],
        raw: bytes,
        context: Mapping[str, Any] | None = None,
        adapter: str = "proxy",
        off_loop: bool | None = None,
    ) -> Rescue:
        """The exchange of a rescued request, started: its first request is ready to send.
        ``adapter`` names who serves it in the metrics (proxy, sdk, litellm); ``off_loop``
        starts it in a worker thread (None: when ``raw`` is large)."""
        config, body, wire = self.config, prepared.body, prepared.wire
        # a request of no conversation shares no state with any other
        state = await self.store.load(prepared.key) if prepared.key else None
        engine = RescueEngine(
            config,
            wire,
            body,
            state,
            prepared.lang,
            self.detector_factory,
            history_cache=self.history,
            conversation_key=prepared.key,
        )
        exchange = Exchange(
            engine, wire, streaming=body.get("stream") is True, mirror=config.mode == "observe"
        )
        driver = ExchangeDriver(
            exchange,
            transport,
            config,
            url,
            headers,
            raw,
            self.store,
            prepared.key,
            self.audit,
            {
                "conversation": prepared.key,
                "protocol": wire.name,
                "model": body.get("model"),
                **(context or {}),
            },
        )
        guard = self.guard

        def judge_and_start() -> tuple[GuardVerdict | None, Any]:
            # the tool-loop guard reads every call of the history; a stopped request is
            # never started (nothing goes upstream)
            loop = guard.judge(wire, body)
            if loop is not None and loop.rung == "stop":
                return loop, None
            return loop, exchange.start()

        if off_loop if off_loop is not None else len(raw) > START_OFF_LOOP_BYTES:
            loop, step = await anyio.to_thread.run_sync(judge_and_start)
        else:
            loop, step = judge_and_start()
        if loop is not None and self.audit is not None:
            self.audit.write("tool_loop", loop.audit(), driver.context)
        if step is None:
            assert loop is not None
            return self._stopped(prepared, loop, engine, exchange, driver, adapter)
        await driver.carry_out(step)
        first = step.request
        assert first is not None
        if loop is not None and loop.rung == "steer":
            # the note goes to the upstream's copy only: the client's history never holds it
            steered = self.guard.steered(wire, first.body, loop, prepared.lang)
            first = SendRequest(steered, first.attempt, changed=True)
        if first.changed and len(raw) > LARGE_BODY_BYTES:
            content = await anyio.to_thread.run_sync(driver.content_of, first)
        else:
            content = driver.content_of(first)
        return Rescue(engine, exchange, driver, first, content, adapter, loop=loop)

    def _stopped(
        self,
        prepared: Prepared,
        loop: GuardVerdict,
        engine: RescueEngine,
        exchange: Exchange,
        driver: ExchangeDriver,
        adapter: str,
    ) -> Rescue:
        """A stopped request: the guard's answer, nothing sent upstream."""
        model = prepared.body.get("model")
        payload = self.guard.stop_answer(
            prepared.wire,
            exchange.streaming,
            model if isinstance(model, str) else "",
            loop,
            prepared.lang,
        )
        headers = {
            "content-type": prepared.wire.stream_media_type
            if exchange.streaming
            else "application/json",
            OUTCOME_HEADER: loop.outcome,
        }
        if exchange.streaming:
            answer = Answer(200, headers, chunks=_once(payload))
        else:
            answer = Answer(200, headers, payload)
        first = SendRequest(prepared.body, 0, changed=False)
        rescue = Rescue(engine, exchange, driver, first, b"", adapter, loop=loop)
        rescue.stopped = answer
        return rescue

    async def finished(self, rescue: Rescue) -> None:
        """The request is over, however it ended: close its upstream responses and count it
        (once)."""
        await rescue.driver.aclose()
        if rescue.finished:
            return
        rescue.finished = True
        verdict = rescue.loop
        if verdict is not None:
            self.metrics.tool_loop(
                rescue.exchange.wire.name,
                rescue.adapter,
                verdict.loop.kind,
                verdict.rung,
                verdict.tokens(),
                verdict.cost.price,
            )
        driver = rescue.driver
        duration_s = driver.clock.elapsed_s()
        first_byte_s = driver.first_byte_s
        if first_byte_s is None and not rescue.exchange.streaming and rescue.engine.done:
            first_byte_s = duration_s  # a whole body: its first byte went with the rest
        self.metrics.response(
            rescue.exchange.wire.name,
            rescue.adapter,
            rescue.engine.stats,
            errors=rescue.first_errors + rescue.engine.stats.upstream_errors,
            duration_s=duration_s,
            first_byte_s=first_byte_s,
        )


async def _once(payload: bytes) -> AsyncIterator[bytes]:
    yield payload
