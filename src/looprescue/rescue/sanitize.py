"""History sanitization: loops already sitting in a request's earlier assistant messages are
cut out before the request goes upstream, so the model never re-reads an old loop (one a client
stored before looprescue ran, or one another tool produced).

Each text of an earlier assistant message (visible text, thinking, ``reasoning_content``) is
judged with the same rule as ``clean`` (``pruning.first_hit``) and cut with the same marker
(``pruning.cut_text``). Tool calls, tool results and user messages are never touched; a final
assistant message (a prefill the model continues from) is left as it is.

How a protocol spells its history, and what its providers require of an edited message, lives
in the protocol's wire object (:meth:`HistoryFormat.prune_history`); this module decides what
to cut. Verdicts are cached per conversation by content hash (:class:`HistoryCache`), so a
long history is scanned once, and each later turn only scans what is new.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import LoopRescueConfig
from ..pruning import TextCut, cut_text, first_hit

# Verdicts of one text take about 200 bytes: 16384 of them stay within a few MB.
HISTORY_CACHE_ENTRIES = 16_384
_NO_LOOP = ("", -1)  # a cached verdict: this text holds no loop


@dataclass(frozen=True, slots=True)
class HistoryCut:
    """What sanitization did to one text of an earlier assistant message.

    ``action``: ``pruned`` (cut at the loop with the marker) or ``dropped`` (a thinking block
    without a valid signature, removed because the upstream signs thinking)."""

    message: int  # position in ``messages``
    block: int | None  # position in the message's content list (None: a string field)
    field: str  # the field that held the text
    channel: str
    action: str
    rule: str | None
    original_chars: int
    kept_chars: int

    @property
    def removed_chars(self) -> int:
        return self.original_chars - self.kept_chars

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "block": self.block,
            "field": self.field,
            "channel": self.channel,
            "action": self.action,
            "rule": self.rule,
            "original_chars": self.original_chars,
            "kept_chars": self.kept_chars,
            "removed_chars": self.removed_chars,
        }


class HistoryCache:
    """Bounded LRU of loop verdicts, keyed by conversation and the text's content hash.

    Safe to share between requests and threads (large requests are prepared off the event
    loop)."""

    def __init__(self, capacity: int = HISTORY_CACHE_ENTRIES) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._verdicts: OrderedDict[tuple[str, bytes], tuple[str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conversation: str, digest: bytes) -> tuple[str, int] | None:
        key = (conversation, digest)
        with self._lock:
            verdict = self._verdicts.get(key)
            if verdict is not None:
                self._verdicts.move_to_end(key)
            return verdict

    def put(self, conversation: str, digest: bytes, verdict: tuple[str, int]) -> None:
        with self._lock:
            self._verdicts[(conversation, digest)] = verdict
            while len(self._verdicts) > self.capacity:
                self._verdicts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._verdicts)


@dataclass
class HistoryPruner:
    """Judges the texts of one request: the cut to make in each, from the cache when the
    conversation already sent that text."""

    config: LoopRescueConfig
    cache: HistoryCache | None = None
    conversation: str = ""
    scanned_texts: int = 0  # texts the detector read (cache misses)
    scanned_chars: int = 0
    cached_texts: int = 0  # texts answered from the cache

    def __call__(self, text: str, channel: str) -> tuple[TextCut, str] | None:
        """The cut for ``text`` and the rule that found its loop (None: no loop)."""
        if not text:
            return None
        verdict = self._verdict(text, channel)
        if verdict is _NO_LOOP:
            return None
        rule, keep = verdict
        cut = cut_text(
            text, keep, channel, marker=self.config.marker, language=self.config.language
        )
        return (cut, rule) if cut is not None else None

    def _verdict(self, text: str, channel: str) -> tuple[str, int]:
        cache = self.cache
        digest = b""
        if cache is not None:
            digest = _digest(text, channel)
            cached = cache.get(self.conversation, digest)
            if cached is not None:
                self.cached_texts += 1
                return _NO_LOOP if cached == _NO_LOOP else cached
        self.scanned_texts += 1
        self.scanned_chars += len(text)
        hit = first_hit(text, channel, self.config)
        verdict = _NO_LOOP if hit is None else (hit.rule, hit.prune_offset)
        if cache is not None:
            cache.put(self.conversation, digest, verdict)
        return verdict


def _digest(text: str, channel: str) -> bytes:
    hasher = hashlib.blake2b(channel.encode(), digest_size=16)
    hasher.update(text.encode("utf-8", "surrogatepass"))
    return hasher.digest()


class HistoryFormat(Protocol):
    """How one protocol's request history is read and edited (its wire object)."""

    def prune_history(
        self, body: Mapping[str, Any], pruner: HistoryPruner
    ) -> tuple[dict[str, Any] | None, list[HistoryCut]]:
        """A new body with loops cut out of the earlier assistant messages, and what was cut
        (None and no cuts: nothing to change, the request goes as it came)."""


@dataclass
class Sanitized:
    """The outcome of sanitizing one request body."""

    body: Mapping[str, Any]  # the very same object when nothing changed
    cuts: list[HistoryCut] = field(default_factory=list)
    scanned_texts: int = 0
    scanned_chars: int = 0
    cached_texts: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.cuts)

    @property
    def removed_chars(self) -> int:
        return sum(cut.removed_chars for cut in self.cuts)

    def removed_by_channel(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cut in self.cuts:
            out[cut.channel] = out.get(cut.channel, 0) + cut.removed_chars
        return out

    def audit(self) -> dict[str, Any]:
        return {
            "removed_chars": self.removed_chars,
            "scanned_texts": self.scanned_texts,
            "scanned_chars": self.scanned_chars,
            "cached_texts": self.cached_texts,
            "cuts": [cut.to_dict() for cut in self.cuts],
        }


def sanitize_history(
    history: HistoryFormat,
    body: Mapping[str, Any],
    config: LoopRescueConfig,
    cache: HistoryCache | None = None,
    conversation: str = "",
) -> Sanitized:
    """``body`` with old loops cut out of its earlier assistant messages."""
    pruner = HistoryPruner(config, cache, conversation)
    new_body, cuts = history.prune_history(body, pruner)
    counts = (pruner.scanned_texts, pruner.scanned_chars, pruner.cached_texts)
    if new_body is None or not cuts:
        return Sanitized(body, [], *counts)
    return Sanitized(new_body, cuts, *counts)


def earlier_assistant_messages(body: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``(position, message)`` of each assistant message that is not the request's last one."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    last = len(messages) - 1
    for position, message in enumerate(messages):
        if position < last and isinstance(message, Mapping) and message.get("role") == "assistant":
            yield position, message
