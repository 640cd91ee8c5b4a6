"""Call identity: canonical arguments and volatile-token masking of results."""

from __future__ import annotations

import pytest

from looprescue.doctor.identity import (
    CompletedCall,
    canonical_arguments,
    digest,
    mask_volatile,
    result_digest,
    tool_name,
)


def test_arguments_are_re_serialised_with_sorted_keys_at_every_depth() -> None:
    a = '{"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": "s"}}'
    b = '{"a": {"x": "s", "y": [1, {"p": 3, "q": 2}]}, "b": 1}'
    assert canonical_arguments(a) == canonical_arguments(b)
    assert canonical_arguments(a) == '{"a":{"x":"s","y":[1,{"p":3,"q":2}]},"b":1}'


def test_arguments_compare_as_parsed_json_not_as_text() -> None:
    assert canonical_arguments('{"command":"ls"}') == canonical_arguments('{ "command" : "ls" }')
    assert canonical_arguments({"b": 2, "a": 1}) == '{"a":1,"b":2}'
    assert canonical_arguments('{"command":"ls"}') != canonical_arguments('{"command":"ls -a"}')
    # list order is meaningful and kept
    assert canonical_arguments("[1, 2]") != canonical_arguments("[2, 1]")


def test_integers_stay_exact_and_non_json_arguments_compare_as_text() -> None:
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
        ("call toolu_00_1d75f78a374c5d6d", "call <id>"),
        ("req_011CUx7Yq2 chatcmpl-9zQ1a2B3c4D5 run_case_12", "<id> <id> run_case_12"),
        ("\x1b[1;31mFAILED\x1b[0m", "FAILED"),
        ("/tmp/tmpk3j2x9q1/out.txt /tmp/tmp.Ab12Cd34Ef/x", "/tmp/<tmp>/out.txt /tmp/<tmp>/x"),
        ("sha 3f786850e387550fdab836ed7e6dc881de23001b", "sha <hex>"),
        ("ptr 0x7ffe12", "ptr <hex>"),
        (
            "took 1.25s, then 300 ms, then 2 minutes",
            "took <duration>, then <duration>, then <duration>",
        ),
        ("started at 1795982624880", "started at <number>"),
        ("Chunk ID: 1ff8b3\nOutput:\nnotes.txt", "Chunk ID: <id>\nOutput:\nnotes.txt"),
        ("session_id=a7c2 user id: 9xk1", "session_id=<id> user id: <id>"),
        ('{"requestId": "x9k2"}', '{"requestId": "<id>"}'),
        # a random id can come out all digits or all letters; a counting id is no progress
        ("Chunk ID: 594504", "Chunk ID: <id>"),
        ("Chunk ID: fbeacd", "Chunk ID: <id>"),
        ("created issue id: 7", "created issue id: <id>"),
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
        "valid: a1b2",  # "id" that ends another word is no label
        "id: main",
    ],
)
def test_stable_content_is_left_alone(text: str) -> None:
    assert mask_volatile(text) == text


def test_rereading_an_unchanged_file_is_a_repeat_while_real_progress_is_not() -> None:
    first = result_digest(False, None, "done in 12ms at 2026-11-29T20:46:31Z")
    again = result_digest(False, None, "done in 15ms at 2026-11-29T20:47:02Z")
    assert first == again
    assert result_digest(False, None, "progress 40%") != result_digest(False, None, "progress 60%")
    assert result_digest(True, None, "x") != result_digest(False, None, "x")
    assert result_digest(True, "A", "x") != result_digest(True, "B", "x")


def test_two_calls_are_the_same_when_tool_arguments_and_masked_result_match() -> None:
    args = digest(canonical_arguments('{"a": 1}'))
    one = CompletedCall(1, 1, "read", args, 2, result_digest(False, None, "x"))
    two = CompletedCall(5, 1, "read", args, 6, result_digest(False, None, "x"))
    other = CompletedCall(9, 1, "bash", args, 10, result_digest(False, None, "x"))
    assert one.identity == two.identity != other.identity


def test_tool_names_are_shown_as_logged_on_one_line() -> None:
    assert tool_name("read") == "read"
    assert tool_name("mcp__files__read_file") == "mcp__files__read_file"
    assert tool_name("read\nfile\t2") == "read\\nfile\\t2"
    assert tool_name("a\u2028b\x1b") == "a\\u2028b\\x1b"
    assert tool_name(None) == tool_name(7) == tool_name("") == "?"


def test_a_tool_name_longer_than_64_characters_is_shortened_with_a_hash_of_the_whole() -> None:
    long_a, long_b = "t" * 100 + "a", "t" * 100 + "b"
    assert len(tool_name(long_a)) == len(tool_name(long_b)) == 64
    assert tool_name(long_a) != tool_name(long_b)
    assert tool_name(long_a).startswith("t" * 47 + "…")
    assert tool_name("x" * 64) == "x" * 64
