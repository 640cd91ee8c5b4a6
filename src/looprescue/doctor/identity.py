"""When are two tool calls "the same"? Same tool, same canonical arguments, same result.

Arguments are compared as deep key-sorted JSON, so key order never makes two calls differ.
Arguments and results are compared after masking volatile tokens (timestamps, durations, hex
ids, uuids, request ids, temp paths) and dropping terminal escape codes: re-reading an
unchanged file gives the same identity every time, while polling a job whose output really
changes does not.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_DIGEST_BYTES = 16
_NAME_CHARS = 64


def _hex_id(match: re.Match[str]) -> str:
    """An 8+ char hex run is an id or hash only if it mixes digits and letters."""
    token = match.group(0)
    has_digit = any(c.isdigit() for c in token)
    has_letter = any(not c.isdigit() for c in token)
    return "<hex>" if has_digit and has_letter else token


_HEX = frozenset("0123456789abcdefABCDEF")


def _labelled_id(match: re.Match[str]) -> str:
    """A value after an ``id`` label (``Chunk ID: 1ff8b3``, ``session_id=4021``,
    ``"requestId": "x9k2"``) names a thing; it measures no progress, so two results that differ
    only there are the same. The label must end a word (``valid: a1b2`` is no id) or be camel
    case (``requestId``), and the value must hold a digit or be hex of 6 or more (a random id
    can come out all digits or all letters); a word (``id: main``) stays."""
    start = match.start()
    before = match.string[start - 1] if start else ""
    label = match.group(1)
    if before.isalpha() and not (label == "Id" and before.islower()):
        return match.group(0)
    value = match.group(3)
    hexlike = len(value) >= 6 and all(c in _HEX for c in value)
    if hexlike or any(c.isdigit() for c in value):
        return match.group(1) + match.group(2) + "<id>"
    return match.group(0)


# (pattern, replacement, a substring the text must contain for the pattern to apply at all).
# Order matters: whole timestamps before their date/time parts, uuids before bare hex. Each
# pattern starts with a character class (boundaries are checked by a lookbehind placed after
# the first character) so the regex engine only tries positions where a token can start.
_VOLATILE: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str], str | None], ...] = (
    (
        re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"),
        "<uuid>",
        "-",
    ),
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?"
        ),
        "<timestamp>",
        "-",
    ),
    (re.compile(r"\d(?<!\d\d)\d{3}-\d{2}-\d{2}(?!\d)"), "<date>", "-"),
    (re.compile(r"\d(?<!\d\d)\d?:\d{2}:\d{2}(?:[.,]\d+)?(?!\d)"), "<time>", ":"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>", "0x"),
    # hex ids and hashes, standing alone or after a prefix such as "bash-" or "toolu_00_"
    (re.compile(r"[0-9a-fA-F](?<![0-9A-Za-z].)[0-9a-fA-F]{7,}(?![0-9A-Za-z])"), _hex_id, None),
    (
        re.compile(
            r"\d(?<![\w.]\d)\d*(?:\.\d+)?\s?"
            r"(?:ns|µs|us|ms|s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?)(?![A-Za-z])"
        ),
        "<duration>",
        None,
    ),
    (re.compile(r"\d(?<!\d\d)\d{9,}(?!\d)"), "<number>", None),  # epoch times, counters
)
_DIGIT = re.compile(r"\d")

# Terminal escape codes (colours, cursor moves, window titles) carry no content.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def _request_id(match: re.Match[str]) -> str:
    """``req_…``, ``chatcmpl-…``, ``toolu_…``: an id only when its tail mixes digits and
    letters (``run_case_12`` is a name, not an id)."""
    tail = match.group(1)
    mixed = any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail)
    return "<id>" if mixed else match.group(0)


# Tokens that may hold no digit at all: random temp names, prefixed request ids, labelled ids.
# A temp path keeps its file name (twenty files edited in one temp dir stay twenty different
# calls); only the random directory part is masked.
_UNDIGITED: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str], str], ...] = (
    (re.compile(r"(?:/private)?/var/folders/[\w-]+/[\w-]+/T/"), "<tmpdir>/", "/var/folders/"),
    (re.compile(r"/tmp/pytest-of-[\w.-]+/pytest-\d+/"), "/tmp/<tmpdir>/", "pytest-of-"),
    (
        re.compile(r"t(?<![A-Za-z0-9_]t)mp(?:[a-z0-9_]{8}|\.[A-Za-z0-9]{10})(?![A-Za-z0-9_])"),
        "<tmp>",
        "tmp",
    ),
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?:req|request|msg|chatcmpl|call|toolu|resp|run|trace|span)"
            r"[-_](?:\d+_)?([A-Za-z0-9]{10,})(?![A-Za-z0-9_])"
        ),
        _request_id,
        "",
    ),
    # ids known by their label, of any length and with or without a digit (Codex's
    # ``Chunk ID: 1ff8b3``)
    (
        re.compile(r"([Ii][Dd])([\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9][\w-]*)(?![\w-])"),
        _labelled_id,
        "",
    ),
)


def mask_volatile(text: str) -> str:
    """Replace tokens that change between otherwise identical outputs by placeholders, and
    drop terminal escape codes."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    for pattern, replacement, needed in _UNDIGITED:
        if needed in text:
            text = pattern.sub(replacement, text)
    if _DIGIT.search(text) is None:
        return text  # every other volatile token holds a digit
    for pattern, replacement, wanted in _VOLATILE:
        if wanted is None or wanted in text:
            text = pattern.sub(replacement, text)
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


def arguments_key(arguments: Any) -> bytes:
    """A call's arguments as compared: canonical JSON with volatile tokens masked."""
    return canonical_key(canonical_arguments(arguments))


def canonical_key(canonical: str) -> bytes:
    """:func:`arguments_key` of arguments already in canonical form."""
    return digest(mask_volatile(canonical))


def tool_name(value: Any) -> str:
    """A tool's name as signals show it: one line (control characters escaped) and at most
    64 characters; a longer name keeps its head and a hash of the whole, so names stay apart."""
    if not isinstance(value, str) or not value:
        return "?"
    name = value
    if not name.isprintable():  # repr of one character is its escape: \n, \x1b, \u2028
        name = "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)
    if len(name) > _NAME_CHARS:
        name = f"{name[: _NAME_CHARS - 17]}…{digest(value).hex()[:16]}"
    return name


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
    error_code: str | None = None  # the logged error code of a failed result, if any

    @property
    def identity(self) -> tuple[str, bytes, bytes | None]:
        return (self.name, self.args_digest, self.result_key)
