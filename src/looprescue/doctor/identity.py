"""When are two tool calls "the same"? Same tool, same canonical arguments, same result.

Arguments are compared as deep key-sorted JSON, so key order never makes two calls differ.
Results are compared after masking volatile tokens (timestamps, ids, durations, hex, uuids):
re-reading an unchanged file gives the same identity every time, while polling a job whose
output really changes does not.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

_DIGEST_BYTES = 16

# Order matters: whole timestamps before their date/time parts, uuids before bare hex.
_VOLATILE = (
    (
        re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
        "<uuid>",
    ),
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?"
        ),
        "<timestamp>",
    ),
    (re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)"), "<date>"),
    (re.compile(r"(?<!\d)\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?!\d)"), "<time>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    # hex ids and hashes: 8+ hex chars holding both a digit and a letter, standing alone or
    # after a prefix such as "bash-" or "toolu_00_".
    (
        re.compile(
            r"(?<![0-9A-Za-z])(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9A-Za-z])"
        ),
        "<hex>",
    ),
    (
        re.compile(
            r"(?<![\w.])\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)(?![A-Za-z])"
        ),
        "<duration>",
    ),
    (re.compile(r"(?<!\d)\d{10,}(?!\d)"), "<number>"),  # epoch times, counters, pids
)


def mask_volatile(text: str) -> str:
    """Replace tokens that change between otherwise identical outputs by placeholders."""
    for pattern, placeholder in _VOLATILE:
        text = pattern.sub(placeholder, text)
    return text


def canonical_arguments(arguments: Any) -> str:
    """Deep key-sorted compact JSON of a call's arguments (a JSON string or a value).

    The standard parser is used on purpose: it keeps integers beyond 64 bits exact, where a
    float conversion would make different arguments look equal. A string that is not JSON is
    compared as it is, whitespace trimmed.
    """
    value = arguments
    if isinstance(arguments, (str, bytes)):
        try:
            value = json.loads(arguments)
        except (ValueError, TypeError):
            raw = (
                arguments.decode("utf-8", "replace") if isinstance(arguments, bytes) else arguments
            )
            return raw.strip()
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
        )
    except (TypeError, ValueError):  # unsortable keys or circular values: compare the text
        return repr(value)


def digest(text: str) -> bytes:
    """A short fixed-size stand-in for a possibly huge string (bounded memory per call)."""
    return hashlib.blake2b(
        text.encode("utf-8", "surrogatepass"), digest_size=_DIGEST_BYTES
    ).digest()


def result_digest(failed: bool, error_code: str | None, text: str) -> bytes:
    return digest(f"{int(failed)}\x00{error_code or ''}\x00{mask_volatile(text)}")


@dataclass(frozen=True, slots=True)
class CompletedCall:
    """A tool call together with what it produced (``result_seq`` None: no result logged)."""

    call_seq: int | None
    turn: int | None
    name: str
    args_digest: bytes
    result_seq: int | None = None
    result_key: bytes | None = None
    failed: bool = False
    interrupted: bool = False

    @property
    def identity(self) -> tuple[str, bytes, bytes | None]:
        return (self.name, self.args_digest, self.result_key)
