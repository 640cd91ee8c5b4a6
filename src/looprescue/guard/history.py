"""A request's history as the guard reads it: each tool call paired with its result.

The readers turn a protocol's messages into protocol-neutral items: a :class:`ToolStep` per
answered call, in the order the results came, and :data:`HUMAN_TURN` where a person spoke (a
user message that answers no call). Each wire object calls its reader (``tool_history``); no
other module knows how a protocol spells a tool call. Odd shapes are skipped, never fatal: the
guard only reads what it understands.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call and what it gave back."""

    name: str
    arguments: Any  # a JSON string or a decoded value, as the protocol carries it
    result: str
    failed: bool
    message: int = field(default=-1, compare=False)  # the index of its result's message


class _HumanTurn:
    __slots__ = ()

    def __repr__(self) -> str:
        return "HUMAN_TURN"


HUMAN_TURN = _HumanTurn()
HistoryItem = ToolStep | _HumanTurn

# OpenAI Chat has no error flag on a tool message; a result that opens like an error report
# is taken as one (an agent's own "Error: …" wrapping, a traceback, a JSON error object).
_LOOKS_FAILED = re.compile(
    r'\s*(?:error\b|exception\b|traceback \(most recent call last\)|\{\s*"error"\s*:)',
    re.IGNORECASE,
)


def _block_text(content: Any) -> str:
    """A result's content as one string: text blocks as they are, any other block (an image,
    a document) as its canonical JSON so that two different images stay different."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, sort_keys=True, default=repr)
    parts = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text":
            text = block.get("text")
            parts.append(text if isinstance(text, str) else "")
        elif isinstance(block, str):
            parts.append(block)
        else:
            parts.append(json.dumps(block, sort_keys=True, default=repr))
    return "\n".join(parts)


def anthropic_tool_history(body: Mapping[str, Any]) -> list[HistoryItem]:
    """Messages API: ``tool_use`` blocks of assistant messages, answered by ``tool_result``
    blocks (``tool_use_id``, ``is_error``) of the next user message."""
    out: list[HistoryItem] = []
    calls: dict[str, tuple[str, Any]] = {}
    for index, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            calls = {}  # calls are answered by the next user message, or never
            for block in content if isinstance(content, list) else ():
                if isinstance(block, Mapping) and block.get("type") == "tool_use":
                    call_id, name = block.get("id"), block.get("name")
                    if isinstance(call_id, str) and isinstance(name, str):
                        calls[call_id] = (name, block.get("input"))
        elif role == "user":
            answered = False
            for block in content if isinstance(content, list) else ():
                if not isinstance(block, Mapping) or block.get("type") != "tool_result":
                    continue
                answered = True
                call = calls.pop(str(block.get("tool_use_id")), None)
                if call is not None:
                    text = _block_text(block.get("content"))
                    failed = block.get("is_error") is True
                    out.append(ToolStep(call[0], call[1], text, failed, index))
            if not answered:
                out.append(HUMAN_TURN)
    return out


def openai_tool_history(body: Mapping[str, Any]) -> list[HistoryItem]:
    """Chat Completions: an assistant message's ``tool_calls``, answered by ``role: tool``
    messages (``tool_call_id``). A ``role: user`` message is a person speaking, unless it
    follows tool messages directly: that is the harness's note on the results (DSH sends its
    repeat-tool reminder so), which the Messages API puts in the results' own user message."""
    out: list[HistoryItem] = []
    calls: dict[str, tuple[str, Any]] = {}
    after_results = False
    for index, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role == "tool":
            after_results = True
        elif role != "user":
            after_results = False
        if role == "assistant":
            calls = {}
            tool_calls = message.get("tool_calls")
            for call in tool_calls if isinstance(tool_calls, list) else ():
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping):
                    continue
                call_id, name = call.get("id"), function.get("name")
                if isinstance(call_id, str) and isinstance(name, str):
                    calls[call_id] = (name, function.get("arguments"))
        elif role == "tool":
            call = calls.pop(str(message.get("tool_call_id")), None)
            if call is not None:
                text = _block_text(message.get("content"))
                failed = bool(_LOOKS_FAILED.match(text))
                out.append(ToolStep(call[0], call[1], text, failed, index))
        elif role == "user" and not after_results:
            out.append(HUMAN_TURN)
    return out


def responses_tool_history(body: Mapping[str, Any]) -> list[HistoryItem]:
    """The Responses API: ``function_call`` items of ``input``, answered by
    ``function_call_output`` items with the same ``call_id``. A user message is a person
    speaking, unless it follows outputs directly (the harness's note, as on Chat Completions).
    A string ``input`` is one user message and holds no calls."""
    inputs = body.get("input")
    if not isinstance(inputs, list):
        return []
    out: list[HistoryItem] = []
    calls: dict[str, tuple[str, Any]] = {}
    after_results = False
    for index, item in enumerate(inputs):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if isinstance(call_id, str) and isinstance(name, str):
                calls[call_id] = (name, item.get("arguments"))
            after_results = False
        elif kind == "function_call_output":
            after_results = True
            call = calls.pop(str(item.get("call_id")), None)
            if call is not None:
                text = _block_text(item.get("output"))
                failed = bool(_LOOKS_FAILED.match(text))
                out.append(ToolStep(call[0], call[1], text, failed, index))
        elif item.get("role") == "user" and kind in (None, "message"):
            if not after_results:
                out.append(HUMAN_TURN)
        else:
            after_results = False
    return out
