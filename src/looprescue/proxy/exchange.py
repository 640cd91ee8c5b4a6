"""One rescued client request, sans-IO: upstream bytes in, client bytes and actions out.

:class:`Exchange` joins a protocol's wire object and the rescue engine. It decodes upstream
bytes (SSE, or a whole JSON body) into engine events, feeds them, and routes what the engine
returns in one place (:meth:`Exchange._route`): client items are encoded (or collected into one
body), everything else becomes a field of the returned :class:`Step` for the I/O side to carry
out: audit records, a conversation state to store, "close this upstream response", "send this
request".

The I/O side (``proxy/stream.py`` for the proxy; an SDK transport could be another) only
moves bytes: it sends the requests a step names, feeds what comes back, writes ``Step.client``
to the client, and reports transport failures with :meth:`Exchange.fail`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..rescue.engine import RescueEngine
from ..rescue.events import (
    AuditRecord,
    CloseUpstream,
    EmitError,
    EmitPing,
    ResumeTimedOut,
    SaveConversation,
    SendRequest,
    UpstreamFailed,
)
from . import jsonfast
from .sse import SSEError, SSEParser
from .wire import Malformed, Wire

_ACTIONS = frozenset({AuditRecord, CloseUpstream, SendRequest, SaveConversation})


@dataclass(slots=True)
class Step:
    """What to do after feeding the exchange, in this order: write ``client``, store ``save``,
    write ``audit``, close the current upstream response when ``close_upstream``, send
    ``request`` when set."""

    client: bytes = b""
    request: SendRequest | None = None
    close_upstream: bool = False
    save: Any = None  # ConversationState snapshot
    audit: list[AuditRecord] = field(default_factory=list)


class Exchange:
    """The engine and the wire of one client request (streaming or not)."""

    def __init__(self, engine: RescueEngine, wire: Wire, streaming: bool) -> None:
        self.engine = engine
        self.wire = wire
        self.streaming = streaming
        self._encoder = wire.encoder() if streaming else None
        self._collector = None if streaming else wire.collector()
        self._parser = SSEParser()
        self._decoder = wire.decoder()
        self.attempt = -1  # the upstream request being fed (SendRequest.attempt)
        self._accepting = False  # False once the engine said to stop reading this response

    @property
    def done(self) -> bool:
        return self.engine.done

    @property
    def reading(self) -> bool:
        """True while the current upstream response is still to be fed."""
        return self._accepting

    # ------------------------------------------------------------------ upstream requests

    def start(self) -> Step:
        """The first upstream request (and any state change it implies)."""
        return self._route(self.engine.start())

    def response_started(self, attempt: int) -> None:
        """A response to request ``attempt`` is about to be fed."""
        self.attempt = attempt
        self._parser = SSEParser()
        self._decoder = self.wire.decoder()
        self._accepting = True

    def passes_through(self, status: int) -> bool:
        """True when an HTTP error answer goes to the client as it is: for the client's own
        request (its retry policy keys off status, headers and body), not for a continuation."""
        return status != 200 and self.attempt <= 0

    def http_error(self, status: int, payload: bytes) -> Step:
        """A continuation answered with an HTTP error status."""
        message = payload.decode("utf-8", "replace")
        return self.fail(UpstreamFailed("http", message, status))

    # ------------------------------------------------------------------ feeding

    def feed_bytes(self, chunk: bytes) -> Step:
        """Streamed upstream bytes (any split)."""
        if not self._accepting:
            return Step()
        try:
            frames = self._parser.feed(chunk)
        except SSEError as err:
            return self.fail(UpstreamFailed("malformed", f"upstream stream: {err}"))
        step = Step()
        if not frames:
            return step
        decode = self._decoder.decode
        if len(frames) == 1:
            events = decode(frames[0])
        else:
            events = [event for sse in frames for event in decode(sse)]
        # the engine judges a read's run of deltas once, after its last one
        feed = self.engine.feed
        last = len(events) - 1
        for number, event in enumerate(events):
            self._route(feed(event, more=number < last), step)
            if not self._accepting:
                break
        return step

    def upstream_ended(self) -> Step:
        """The current upstream response's body ended."""
        if not self._accepting:
            return Step()
        try:
            self._parser.close()
        except SSEError as err:
            return self.fail(UpstreamFailed("malformed", f"upstream stream: {err}"))
        message = "upstream stream ended before its end-of-message event"
        return self.fail(UpstreamFailed("transport", message))

    def feed_whole(self, payload: bytes) -> Step:
        """A complete (non-streaming) upstream response body."""
        try:
            events = self.wire.whole_events(jsonfast.loads(payload))
        except (Malformed, ValueError, KeyError, TypeError) as err:
            events = [UpstreamFailed("malformed", f"upstream response body: {err}")]
        step = Step()
        for event in events:
            self._route(self.engine.feed(event), step)
            if not self._accepting:
                break
        return step

    def fail(self, event: UpstreamFailed | ResumeTimedOut) -> Step:
        """The transport broke (connection, stall, timeout) or the request failed."""
        return self._route(self.engine.feed(event))

    # ------------------------------------------------------------------ the client side

    def ping(self) -> bytes:
        """Bytes that keep a streaming client connection alive while the upstream is quiet."""
        assert self._encoder is not None
        return self._encoder.encode(EmitPing())

    def whole_response(self) -> tuple[int, bytes]:
        """Status and JSON body of a non-streaming answer (call once the engine is done)."""
        assert self._collector is not None
        error = self._collector.error
        if error is None:
            try:
                return 200, jsonfast.dumps(self._collector.result())
            except Malformed as err:
                error = EmitError("malformed", f"upstream response body: {err}")
        return 502, jsonfast.dumps(self.wire.error_body(error))

    def gateway_error(self, message: str) -> bytes:
        """The protocol's error body for an upstream that could not be reached."""
        return jsonfast.dumps(self.wire.error_body(EmitError("transport", message)))

    # ------------------------------------------------------------------ routing

    def _route(self, outputs: list[Any], step: Step | None = None) -> Step:
        """The one place engine output is sorted: client items to the encoder (or collector),
        everything else into the step."""
        if step is None:
            step = Step()
        pieces = []
        for item in outputs:
            kind = type(item)
            if kind not in _ACTIONS:
                if self._encoder is not None:
                    pieces.append(self._encoder.encode(item))
                else:
                    self._collector.add(item)  # type: ignore[union-attr]
            elif kind is AuditRecord:
                step.audit.append(item)
            elif kind is SaveConversation:
                step.save = item.state
            elif kind is CloseUpstream:
                step.close_upstream = True
                self._accepting = False
            else:
                step.request = item
                self._accepting = False
        if pieces:
            step.client += pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if self.engine.done:
            self._accepting = False
        return step
