"""Field access on DSH event dicts for the doctor, tolerant of odd shapes.

The doctor reads whatever a log holds; a missing or oddly typed field means "this fact is not
there", never a crash. Both v4 and the legacy version-0 shapes (FORMAT.md §13) are understood.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

# Events that mark work handed to another agent or hook (context-thrash `delegation`).
DELEGATION_TYPES = frozenset({"subagent/catalog", "subagent/descriptor", "hook/invoked"})
DELEGATION_PREFIXES = ("hook/",)
# Crash-repair results: the harness, not the tool, failed; they are no evidence of misuse.
INTERRUPTION_CODES = frozenset({"TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"})


def data_of(event: Mapping[str, Any]) -> Mapping[str, Any]:
    data = event.get("data")
    return data if type(data) is dict or isinstance(data, Mapping) else {}


def seq_of(event: Mapping[str, Any]) -> int | None:
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def int_field(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_delegation_marker(event_type: str) -> bool:
    return event_type in DELEGATION_TYPES or event_type.startswith(DELEGATION_PREFIXES)


def text_of_blocks(blocks: Any, block_type: str = "text") -> str:
    """Join the ``text`` of every block of ``block_type`` (a bare string counts as text)."""
    if isinstance(blocks, str):
        return blocks if block_type == "text" else ""
    if not isinstance(blocks, list):
        return ""
    parts = [
        block["text"]
        for block in blocks
        if isinstance(block, Mapping)
        and block.get("type") == block_type
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(parts)


def assistant_text(data: Mapping[str, Any]) -> str:
    """The visible text of an ``assistant/message`` (reasoning and tool calls excluded)."""
    message = data.get("message")
    if isinstance(message, Mapping):
        return text_of_blocks(message.get("content"))
    return text_of_blocks(data.get("content"))  # legacy pre-identity shape


def user_source_kind(data: Mapping[str, Any]) -> str | None:
    source = data.get("source")
    if isinstance(source, Mapping) and isinstance(source.get("kind"), str):
        return source["kind"]
    return None


def system_prompt_size(data: Mapping[str, Any]) -> int:
    """Characters of the system prompt carried by a ``system/message``."""
    message = data.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    return len(text_of_blocks(content))


def request_header_size(data: Mapping[str, Any]) -> int:
    """Bytes of the request header (config, tools, and the legacy system string) as logged;
    ``reason``/``startsSeries`` describe the request, not its prompt, so they are left out."""
    header = data.get("header")
    if header is None:
        return 0
    try:
        return len(orjson.dumps(header))  # key order does not change the size
    except TypeError:
        return len(repr(header))


@dataclass(frozen=True, slots=True)
class ToolResultFacts:
    call_id: str | None
    source_call_seq: int | None
    failed: bool
    interrupted: bool
    text: str
    error_code: str | None


def tool_result_facts(event: Mapping[str, Any]) -> ToolResultFacts:
    data = data_of(event)
    message = data.get("message")
    message = message if isinstance(message, Mapping) else {}
    call_id = message.get("toolCallId")
    is_error = message.get("isError") is True
    content: Any = message.get("content")
    if call_id is None and isinstance(content, list) and content:
        # legacy: role "user" with one nested tool-result block
        first = content[0]
        if isinstance(first, Mapping) and first.get("type") == "tool-result":
            call_id = first.get("toolCallId")
            is_error = is_error or first.get("isError") is True
            content = first.get("content")
    if not message:  # legacy pre-identity shape
        call_id = data.get("callId")
        is_error = data.get("isError") is True
        content = data.get("content")
    if call_id is None:
        source = message.get("source")
        if isinstance(source, Mapping):
            call_id = source.get("callId")
    error = data.get("error")
    error_code = None
    if isinstance(error, Mapping):
        code = error.get("code") or error.get("name")
        error_code = str(code) if code is not None else "error"
    elif error is not None:
        error_code = "error"
    source_seqs = event.get("sourceEventSeqs")
    source_call_seq = None
    if isinstance(source_seqs, list) and source_seqs and isinstance(source_seqs[0], int):
        source_call_seq = source_seqs[0]
    return ToolResultFacts(
        call_id=call_id if isinstance(call_id, str) else None,
        source_call_seq=source_call_seq,
        failed=is_error or error_code is not None,
        interrupted=error_code in INTERRUPTION_CODES,
        text=text_of_blocks(content),
        error_code=error_code,
    )


def job_failed(data: Mapping[str, Any]) -> bool:
    """A settled job that failed or whose command exited non-zero (``isError`` alone is not
    reliable for commands that ran but failed, FORMAT.md §6.4)."""
    if data.get("status") == "failed":
        return True
    detail = data.get("detail")
    if isinstance(detail, str) and detail.startswith("exit code:"):
        return detail.removeprefix("exit code:").strip() not in ("0", "")
    return False


def job_call_id(data: Mapping[str, Any]) -> str | None:
    tool_call = data.get("toolCall")
    if isinstance(tool_call, Mapping) and isinstance(tool_call.get("callId"), str):
        return tool_call["callId"]
    return None
