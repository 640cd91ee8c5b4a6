"""The hand-off of each upstream read to an exchange, and of its client bytes to the client.

This runs once per network read of every rescued stream, so it is compiled with the exchange
(``setup.py``); the driver that owns it (``driver.py``) is an async generator, which mypyc does
not compile.
"""

from __future__ import annotations

from collections.abc import Callable

from ..rescue.events import UpstreamFailed
from .core import Exchange, Step
from .upstream import UpstreamError


def feed_item(exchange: Exchange, item: bytes | UpstreamError, now_ms: float | None = None) -> Step:
    """The step of what the upstream response's body gave: bytes, its end (``b""``) or its
    failure; ``now_ms``: when it was read (the engine's hold-back is bounded in time)."""
    if isinstance(item, UpstreamError):
        if item.kind == "stall":
            return exchange.fail(UpstreamFailed("stall", item.message))
        return exchange.fail(UpstreamFailed("transport", item.message))
    return exchange.feed_bytes(item, now_ms) if item else exchange.upstream_ended()


class DirectFeed:
    """What an upstream response pumps its reads into while the exchange only streams: each
    read goes to the exchange, and its client bytes straight to ``direct`` (the client's
    immediate write, False when the client lags). A step that needs more (state to store, audit
    records, the end, a cut, a lagging client) is returned for the driver's loop to carry out;
    None when writing was all it took."""

    def __init__(
        self, exchange: Exchange, direct: Callable[[bytes], bool], now: Callable[[], float]
    ) -> None:
        self.exchange = exchange
        self.direct = direct
        self.now = now
        self.first_write_at: float | None = None  # ``now()`` when client bytes first went out

    def __call__(self, item: bytes | UpstreamError) -> Step | None:
        exchange = self.exchange
        if isinstance(item, bytes) and item and exchange.mirrors_as_it_is(item):
            # observe's usual read: a step only when the client lags (the driver waits)
            if self._write(item):
                return None
            step = Step()
            step.client = item
            return step
        step = feed_item(exchange, item, self.now() * 1000)
        if step.save is not None or step.audit or not exchange.reading:
            return step
        if step.client and not self._write(step.client):
            return step
        return None

    def _write(self, data: bytes) -> bool:
        """``data`` to the client at once; False (nothing written) when it lags."""
        if not self.direct(data):
            return False
        if self.first_write_at is None:
            self.first_write_at = self.now()
        return True
