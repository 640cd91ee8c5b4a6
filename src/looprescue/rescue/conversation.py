"""Per-conversation rescue state: caps, stall streaks, retry parameters, language.

A conversation is identified by the client's own session identifier where it sends one (a
header: DSH's, Claude Code's, Codex's, ``x-looprescue-session``; a body field: DSH's session
log, ``prompt_cache_key``, Anthropic ``metadata.user_id``, OpenAI ``user``), else by its
history: the system prompt, the first user message and the first answer (stable across the
turns of one chat, and an answer is the model's own, so two chats differ from their second
turn on). A first turn without an identifier belongs to no conversation: it cannot be told
from another request with the same prompt, and independent requests never share counters.
Keys carry the route's protocol, so the two routes never share either. States live in a
bounded LRU owned by the adapter.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..language import text_language
from .marker import Lang

SESSION_HEADERS = (
    "x-deepseek-harness-session-id",
    "x-looprescue-session",
    "x-claude-code-session-id",
    "session_id",  # Codex CLI
    "session-id",
)
# body fields that name the client's session or user, most specific first
SESSION_FIELDS = ("prompt_cache_key", "metadata.user_id", "user")


@dataclass
class ConversationState:
    """Mutable counters of one conversation; updated by the engine at the end of a response."""

    consecutive_rescues: int = 0
    stall_streak: int = 0
    # upstream requests still due the retry overrides (set to retryRequests at each resume)
    retry_requests_left: int = 0

    def record_response(
        self,
        *,
        rescues: int,
        had_loop: bool,
        reasoning_chars: int,
        had_text: bool,
        had_tool_call: bool,
        stall_min: int,
    ) -> None:
        """Account for one finished client response: a response without a loop resets the
        rescue count; one with a loop (resumed or not) adds its resumes."""
        self.consecutive_rescues = self.consecutive_rescues + rescues if had_loop else 0
        reasoning_only = not had_text and not had_tool_call and reasoning_chars >= stall_min
        self.stall_streak = self.stall_streak + 1 if reasoning_only else 0

    def copy(self) -> ConversationState:
        return ConversationState(
            self.consecutive_rescues, self.stall_streak, self.retry_requests_left
        )

    def take_retry_request(self) -> bool:
        """True (and count it) when the next upstream request should use the retry overrides."""
        if self.retry_requests_left <= 0:
            return False
        self.retry_requests_left -= 1
        return True

    def take_stall_nudge(self, stall_calls: int) -> bool:
        """True (and reset the streak) when the next request should carry a stall nudge."""
        if stall_calls <= 0 or self.stall_streak < stall_calls:
            return False
        self.stall_streak = 0
        return True


class ConversationStore:
    """Bounded LRU of conversation states."""

    def __init__(self, capacity: int = 4096) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self._capacity = capacity
        self._states: OrderedDict[str, ConversationState] = OrderedDict()

    def get(self, key: str) -> ConversationState:
        state = self._states.get(key)
        if state is None:
            state = ConversationState()
            self._states[key] = state
            while len(self._states) > self._capacity:
                self._states.popitem(last=False)
        else:
            self._states.move_to_end(key)
        return state

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states


def conversation_key(
    headers: Mapping[str, str], body: Mapping[str, Any], route: str = ""
) -> str | None:
    """The conversation of a request on ``route`` (the protocol's name), or None when it
    belongs to none (header names are matched case-insensitively)."""
    prefix = f"{route}/" if route else ""
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in SESSION_HEADERS:
        value = lowered.get(name, "").strip()
        if value:
            return f"{prefix}{name}:{value}"
    for name, value in _session_fields(body):
        return f"{prefix}{name}:{value}"
    system, first_user, first_answer = _conversation_start(body)
    if first_answer is None:
        return None
    digest = hashlib.sha256(
        json.dumps([system, first_user, first_answer], ensure_ascii=False).encode("utf-8")
    ).hexdigest()[:32]
    return f"{prefix}hash:{digest}"


def _session_fields(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The session identifiers a request body carries, most specific first."""
    found = []
    log = body.get("dsh_session_log")
    session = log.get("session") if isinstance(log, Mapping) else None
    if isinstance(session, Mapping) and isinstance(session.get("id"), str) and session["id"]:
        found.append(("dsh_session", session["id"]))
    for name in SESSION_FIELDS:
        holder: Any = body
        for part in name.split("."):
            holder = holder.get(part) if isinstance(holder, Mapping) else None
        if isinstance(holder, str) and holder.strip():
            found.append((name, holder.strip()))
    return found


def _conversation_start(body: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """The system prompt, the first user message and the first answer (None: none yet)."""
    system = _flatten(body.get("system"))
    first_user: str | None = None
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role in ("system", "developer") and not system and first_user is None:
            system = _flatten(message.get("content"))
        elif role == "user" and first_user is None:
            first_user = _flatten(message.get("content"))
        elif role == "assistant" and first_user is not None:
            return system, first_user, _answer_identity(message)
    return system, first_user or "", None


def _answer_identity(message: Mapping[str, Any]) -> str:
    """What identifies an answer as a client sends it back: its text and its tool calls' ids
    (reasoning is left out: clients drop or keep it from turn to turn)."""
    content = message.get("content")
    pieces = [] if isinstance(content, list) else [_flatten(content)]
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                pieces.append(block["text"])
            elif isinstance(block.get("id"), str):
                pieces.append(block["id"])  # a tool call
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping) and isinstance(call.get("id"), str):
            pieces.append(call["id"])
    return "\n".join(pieces)


def _flatten(content: Any) -> str:
    """Text of a message content (string or list of blocks); non-text blocks are skipped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for block in content:
            if isinstance(block, str):
                pieces.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                pieces.append(block["text"])
        return "\n".join(pieces)
    return ""


# Language is judged on a bounded sample of at most this many messages.
SAMPLE_PIECES = 64


def human_texts(body: Mapping[str, Any]) -> list[str]:
    """What the human wrote, as well as a request shows it: one piece per user message.

    DSH merges the prompt with long English runtime-context blocks into one user message, so
    only the first text block (or string) of each user message counts; tool results are skipped.
    """
    pieces = []
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            pieces.append(content)
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "text":
                    text = block.get("text")
                    pieces.append(text if isinstance(text, str) else "")
                    break
    return pieces


def latest_prompt(body: Mapping[str, Any]) -> str:
    """What the human asks for now: the request's last message when a user wrote it (its
    first text), else nothing (the answer follows a tool result or the model's own turn)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return ""
    pieces = human_texts({"messages": messages[-1:]})
    return pieces[0] if pieces else ""


_TOOL_BLOCKS = frozenset({"tool_use", "tool_result", "server_tool_use"})


def uses_tools(body: Mapping[str, Any]) -> bool:
    """True when the request offers tools or its history holds tool calls or results (either
    protocol): tool calls of earlier steps may then have run."""
    if body.get("tools") or body.get("functions"):
        return True
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        if message.get("role") in ("tool", "function") or message.get("tool_calls"):
            return True
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(block, Mapping) and block.get("type") in _TOOL_BLOCKS for block in content
        ):
            return True
    return False


def conversation_language(body: Mapping[str, Any], setting: str = "auto") -> Lang:
    """The language of notes and corrections: the configured one, or the human's."""
    if setting in ("en", "zh"):
        return setting  # type: ignore[return-value]
    # Any Chinese message wins: the OpenAI route sends DSH's English runtime context as
    # separate user messages, which must not outvote a short Chinese prompt.
    pieces = human_texts(body)
    # the first and the latest messages: the prompt, and what the human says now
    if len(pieces) > SAMPLE_PIECES:
        pieces = pieces[: SAMPLE_PIECES // 2] + pieces[-SAMPLE_PIECES // 2 :]
    if any(text_language(piece) == "zh" for piece in pieces):
        return "zh"
    return "en"
