"""Where per-conversation state lives: in this process, or in Redis for several instances.

A store loads a conversation's :class:`ConversationState` when a request arrives and saves
the snapshots the engine emits (``SaveConversation``). :class:`LocalStates` is a bounded LRU in
this process (the default); :class:`RedisStates` shares the state between proxy instances.
When Redis cannot be reached the proxy keeps serving on its local copy, says so once per
outage, and tries Redis again a few seconds later: a request never fails because of it.
Concurrent writes to one conversation are last-writer-wins (a conversation's requests come one
after another).
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Protocol

import orjson

from ..rescue.conversation import ConversationState, ConversationStore

log = logging.getLogger("looprescue.proxy")

REDIS_PREFIX = "looprescue:conversation:"
REDIS_TTL_SECONDS = 7 * 24 * 3600
REDIS_RETRY_SECONDS = 5.0
REDIS_TIMEOUT_SECONDS = 0.5


class StateStore(Protocol):
    async def load(self, key: str) -> ConversationState: ...

    async def save(self, key: str, state: ConversationState) -> None: ...

    async def aclose(self) -> None: ...


class LocalStates:
    """Conversation states in this process (bounded LRU). ``load`` hands out the live object,
    so concurrent requests of one conversation see each other's changes at once."""

    def __init__(self, capacity: int) -> None:
        self.lru = ConversationStore(capacity)

    async def load(self, key: str) -> ConversationState:
        return self.lru.get(key)

    async def save(self, key: str, state: ConversationState) -> None:
        self.put(key, state)

    def put(self, key: str, state: ConversationState) -> None:
        live = self.lru.get(key)
        if live is not state:
            live.consecutive_rescues = state.consecutive_rescues
            live.stall_streak = state.stall_streak
            live.retry_requests_left = state.retry_requests_left

    async def aclose(self) -> None:
        return None


def _encode(state: ConversationState) -> bytes:
    return orjson.dumps(
        {
            "consecutive_rescues": state.consecutive_rescues,
            "stall_streak": state.stall_streak,
            "retry_requests_left": state.retry_requests_left,
        }
    )


def _decode(raw: bytes) -> ConversationState:
    data = orjson.loads(raw)
    fields = ("consecutive_rescues", "stall_streak", "retry_requests_left")
    values = [data.get(name, 0) if isinstance(data, dict) else 0 for name in fields]
    return ConversationState(*(v if isinstance(v, int) and v >= 0 else 0 for v in values))


class RedisStates:
    """Conversation states in Redis, with a local copy that serves whenever Redis does not."""

    def __init__(self, url: str, capacity: int, clock: Any = time.monotonic) -> None:
        import redis.asyncio as redis

        self.url = url
        self.local = LocalStates(capacity)
        self._clock = clock
        self._down_until = 0.0
        self._outage_logged = False
        self._redis = redis.Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
            retry_on_timeout=False,
        )

    @property
    def available(self) -> bool:
        return self._clock() >= self._down_until

    def _failed(self, err: Exception) -> None:
        self._down_until = self._clock() + REDIS_RETRY_SECONDS
        if not self._outage_logged:
            log.warning(
                "conversation state: Redis at %s unreachable (%s: %s); serving on local state",
                self.url,
                type(err).__name__,
                err,
            )
            self._outage_logged = True

    def _recovered(self) -> None:
        if self._outage_logged:
            log.warning("conversation state: Redis at %s reachable again", self.url)
            self._outage_logged = False

    async def load(self, key: str) -> ConversationState:
        if self.available:
            try:
                raw = await self._redis.get(REDIS_PREFIX + key)
            except Exception as err:  # any Redis failure: never fail the request for it
                self._failed(err)
            else:
                self._recovered()
                if raw is None:
                    return await self.local.load(key)
                state = _decode(raw)
                self.local.put(key, state)
                return await self.local.load(key)
        return await self.local.load(key)

    async def save(self, key: str, state: ConversationState) -> None:
        self.local.put(key, state)
        if not self.available:
            return
        try:
            await self._redis.set(REDIS_PREFIX + key, _encode(state), ex=REDIS_TTL_SECONDS)
        except Exception as err:  # any Redis failure: never fail the request for it
            self._failed(err)
        else:
            self._recovered()

    async def aclose(self) -> None:
        # closing a broken connection must not break shutdown
        with contextlib.suppress(Exception):
            await self._redis.aclose()


def open_store(url: str | None, capacity: int) -> StateStore:
    """``None`` or ``memory`` for local state, ``redis://…`` / ``rediss://…`` for Redis."""
    if url is None or url == "memory":
        return LocalStates(capacity)
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisStates(url, capacity)
    raise ValueError(f"state store must be memory or redis://host:port[/db], got {url!r}")
