"""Call identity: canonical arguments and volatile-token masking of results."""

from __future__ import annotations

import pytest

from looprescue.doctor.identity import (
    CompletedCall,
    canonical_arguments,
    digest,
    mask_volatile,
    result_digest,
)


def test_key_order_is_irrelevant_at_every_depth() -> None:
    a = '{"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": "s"}}'
    b = '{"a": {"x": "s", "y": [1, {"p": 3, "q": 2}]}, "b": 1}'
    assert canonical_arguments(a) == canonical_arguments(b)
    assert canonical_arguments(a) == '{"a":{"x":"s","y":[1,{"p":3,"q":2}]},"b":1}'


def test_whitespace_and_value_forms() -> None:
    assert canonical_arguments('{"command":"ls"}') == canonical_arguments('{ "command" : "ls" }')
    assert canonical_arguments({"b": 2, "a": 1}) == '{"a":1,"b":2}'
    assert canonical_arguments('{"command":"ls"}') != canonical_arguments('{"command":"ls -a"}')
    # list order is meaningful and kept
    assert canonical_arguments("[1, 2]") != canonical_arguments("[2, 1]")


def test_non_json_and_huge_integers() -> None:
    assert canonical_arguments("  not json ") == "not json"
    big = '{"n": 123456789012345678901234567890}'
    assert canonical_arguments(big) == '{"n":123456789012345678901234567890}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("job db6042e5-f5b6-4c03-a77e-6077a88448dd done", "job <uuid> done"),
        ("at 2026-11-29T20:46:31.123Z ok", "at <timestamp> ok"),
        ("at 2026-11-29 20:46:31 UTC ok", "at <timestamp> ok"),
        ("on 2026-11-29 only", "on <date> only"),
        ("clock 20:46:31 now", "clock <time> now"),
        ("job bash-0d4701ef7fd0432d settled", "job bash-<hex> settled"),
        ("call toolu_00_1d75f78a374c5d6d", "call toolu_00_<hex>"),
        ("sha 3f786850e387550fdab836ed7e6dc881de23001b", "sha <hex>"),
        ("ptr 0x7ffe12", "ptr <hex>"),
        (
            "took 1.25s, then 300 ms, then 2 minutes",
            "took <duration>, then <duration>, then <duration>",
        ),
        ("started at 1795982624880", "started at <number>"),
    ],
)
def test_volatile_tokens_are_masked(text: str, expected: str) -> None:
    assert mask_volatile(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "a.txt\nb.txt\nsrc\n",
        "progress 45% (3 of 7 files)",
        "exit code: 1",
        "deadbeef",  # hex without a digit is a word, not an id
        "12345678",  # a plain number is not hex-masked
        "3 users, 2 hosts",
    ],
)
def test_stable_content_is_left_alone(text: str) -> None:
    assert mask_volatile(text) == text


def test_result_digest_sees_real_changes_only() -> None:
    first = result_digest(False, None, "done in 12ms at 2026-11-29T20:46:31Z")
    again = result_digest(False, None, "done in 15ms at 2026-11-29T20:47:02Z")
    assert first == again
    assert result_digest(False, None, "progress 40%") != result_digest(False, None, "progress 60%")
    assert result_digest(True, None, "x") != result_digest(False, None, "x")
    assert result_digest(True, "A", "x") != result_digest(True, "B", "x")


def test_completed_call_identity() -> None:
    args = digest(canonical_arguments('{"a": 1}'))
    one = CompletedCall(1, 1, "read", args, 2, result_digest(False, None, "x"))
    two = CompletedCall(5, 1, "read", args, 6, result_digest(False, None, "x"))
    other = CompletedCall(9, 1, "bash", args, 10, result_digest(False, None, "x"))
    assert one.identity == two.identity != other.identity
