"""Header and event-envelope rules (FORMAT.md §3, §4, §13), as DSH enforces them on load."""

from __future__ import annotations

import json
from typing import Any

import orjson

SURFACE_TYPES = frozenset({"system/message", "user/message", "assistant/message", "tool/result"})
ENVELOPE_KEYS = frozenset(
    {"type", "seq", "time", "data", "ignorable", "sourceEventSeqs", "surfaceOp"}
)

# Types DSH 0.2.1 wrote in the recorded sessions, plus the ones rc.8's source lists. DSH knows
# more than this list, so an unknown type is a warning here, never a refusal.
KNOWN_TYPES = frozenset(
    {
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/attempt",
        "assistant/chunk",
        "assistant/message",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "goal/change",
        "hook/invoked",
        "job/registered",
        "job/settled",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "session-log-deepseek/delivery-accepted",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/catalog",
        "subagent/descriptor",
        "system/message",
        "todo/write",
        "tool/call",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
    }
)
KNOWN_TYPE_PREFIXES = ("team/", "tool-workflow/")

SUPPORTED_VERSIONS = (4, 0)


class EnvelopeProblem(ValueError):
    """A rule violation; the caller adds file/frame/line context."""


def parse_json_line(raw: bytes) -> Any:
    """Parse one JSON line; orjson first (fast), stdlib as a fallback for odd escapes."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw.decode("utf-8", errors="strict"))
    except UnicodeDecodeError as err:
        raise EnvelopeProblem(f"invalid UTF-8 at byte {err.start} of the line") from None
    except json.JSONDecodeError as err:
        raise EnvelopeProblem(f"invalid JSON: {err.msg} at column {err.colno}") from None


def is_known_type(event_type: str) -> bool:
    return event_type in KNOWN_TYPES or event_type.startswith(KNOWN_TYPE_PREFIXES)


def check_header(header: Any, expected_version: int | None) -> int:
    """Validate the header line; returns its version (4, or 0 for the legacy layout)."""
    if not isinstance(header, dict):
        raise EnvelopeProblem("header line is not a JSON object")
    if header.get("type") != "session":
        raise EnvelopeProblem(f"first line is not a session header (type {header.get('type')!r})")
    version = header.get("version")
    if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise EnvelopeProblem(
            f"unsupported header version {version!r} (supported: 4, and 0 for legacy logs)"
        )
    if expected_version is not None and version != expected_version:
        raise EnvelopeProblem(
            f"wrong header version {version} for this file name (expected {expected_version})"
        )
    _require(header, "id", str, "header")
    _require(header, "createdAt", int, "header")
    if "cwd" in header:
        _require(header, "cwd", str, "header")
    if version == 4:
        _require(header, "isSeeded", bool, "header")
        _require(header, "delegationDepth", int, "header")
    return version


def check_envelope(event: Any, expected_seq: int, *, strict_surface: bool) -> list[str]:
    """Validate one event envelope; returns warnings (unknown-but-tolerated things)."""
    if not isinstance(event, dict):
        raise EnvelopeProblem("event line is not a JSON object")
    extra = set(event) - ENVELOPE_KEYS
    if extra:
        raise EnvelopeProblem(f"event has unexpected field {sorted(extra)[0]}")
    event_type = event.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise EnvelopeProblem("event has no string `type`")
    if event_type == "session":
        raise EnvelopeProblem("a second session header inside the log")
    seq = event.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise EnvelopeProblem(f"{event_type} event has no integer seq")
    if seq != expected_seq:
        raise EnvelopeProblem(f"seq gap (expected {expected_seq}, got {seq})")
    time = event.get("time")
    if isinstance(time, bool) or not isinstance(time, (int, float)):
        raise EnvelopeProblem(f"{event_type} (seq {seq}) has no numeric time")
    if "data" not in event:
        raise EnvelopeProblem(f"{event_type} (seq {seq}) has no data")
    ignorable = event.get("ignorable", False)
    if not isinstance(ignorable, bool):
        raise EnvelopeProblem(f"{event_type} (seq {seq}): ignorable must be a boolean")
    _check_seq_list(event, "sourceEventSeqs", seq)
    warnings: list[str] = []
    if event_type in SURFACE_TYPES:
        if "surfaceOp" in event:
            _check_surface_op(event["surfaceOp"], event_type, seq, strict_surface)
        elif strict_surface:
            raise EnvelopeProblem(f"{event_type} (seq {seq}) surfaceOp requires an object")
    elif "surfaceOp" in event and strict_surface:
        raise EnvelopeProblem(
            f'session event "{event_type}" (seq {seq}) is not surface-eligible and cannot carry '
            "surfaceOp"
        )
    if not is_known_type(event_type) and not ignorable:
        warnings.append(
            f"event type {event_type!r} (seq {seq}) is unknown to looprescue and not marked "
            "ignorable; DSH may refuse this log if it does not know the type either"
        )
    return warnings


def _check_surface_op(op: Any, event_type: str, seq: int, strict: bool) -> None:
    if op == "append":
        return
    if isinstance(op, dict) and op.get("op") == "replace":
        keys = ("startSeq", "endSeq") if strict else None
        candidates = [keys] if keys else [("startSeq", "endSeq"), ("start", "end")]
        for start_key, end_key in candidates:
            start, end = op.get(start_key), op.get(end_key)
            if _is_int(start) and _is_int(end):
                return
    raise EnvelopeProblem(
        f"{event_type} (seq {seq}) has an invalid surfaceOp {orjson.dumps(op).decode()[:80]}"
    )


def _check_seq_list(event: dict, key: str, seq: int) -> None:
    if key not in event:
        return
    value = event[key]
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise EnvelopeProblem(f"{event['type']} (seq {seq}): {key} must be a list of seqs")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(obj: dict, key: str, kind: type, what: str) -> None:
    value = obj.get(key)
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        raise EnvelopeProblem(f"{what} field {key!r} missing or not a {kind.__name__}")
