"""The public StreamDetector: channels, watch, latching, flush, reset, watermark basics."""

from __future__ import annotations

import pytest

from looprescue.config import LoopRescueConfig
from looprescue.detect import StreamDetector, scan_text

LOOP = "Plan: fix the lock.\n" + "Now emit the grep call for the cleanup handler and retry.\n" * 30


def _feed_all(detector: StreamDetector, channel: str, text: str, step: int = 5):
    hits = []
    for pos in range(0, len(text), step):
        hit = detector.feed(channel, text[pos : pos + step])
        if hit is not None:
            hits.append(hit)
    final = detector.flush(channel)
    return hits + ([final] if final else [])


def test_channels_have_independent_state():
    detector = StreamDetector()
    text_hits = _feed_all(detector, "text", "A healthy sentence about locks and frames. " * 2)
    reasoning_hits = _feed_all(detector, "reasoning", LOOP)
    assert text_hits == [] and len(reasoning_hits) == 1
    assert reasoning_hits[0].channel == "reasoning"
    assert detector.hit("text") is None


def test_a_hit_is_reported_once_and_the_channel_latches():
    detector = StreamDetector()
    hits = _feed_all(detector, "reasoning", LOOP + LOOP)
    assert len(hits) == 1
    assert detector.feed("reasoning", "more looping text") is None
    assert detector.hit("reasoning") == hits[0]
    # the watermark stops at the cut
    assert detector.safe_offset("reasoning") == hits[0].prune_offset


def test_reset_starts_the_channel_afresh():
    detector = StreamDetector()
    first = _feed_all(detector, "reasoning", LOOP)[0]
    detector.reset("reasoning")
    assert detector.consumed("reasoning") == 0 and detector.hit("reasoning") is None
    again = _feed_all(detector, "reasoning", LOOP)[0]
    assert again == first


@pytest.mark.parametrize("watch", ["reasoning", "text"])
def test_an_unwatched_channel_is_never_flagged_or_held(watch):
    other = "text" if watch == "reasoning" else "reasoning"
    detector = StreamDetector(watch=watch)
    assert _feed_all(detector, other, LOOP) == []
    assert detector.safe_offset(other) == detector.consumed(other) == len(LOOP)
    assert _feed_all(detector, watch, LOOP)


def test_watch_comes_from_the_config_when_not_given():
    detector = StreamDetector(LoopRescueConfig(watch="text"))
    assert detector.watch == "text"
    assert _feed_all(detector, "reasoning", LOOP) == []


def test_unknown_channel_is_an_error():
    with pytest.raises(ValueError, match="unknown channel 'tool'"):
        StreamDetector().feed("tool", "x")


def test_flush_judges_the_last_chars():
    # The shortest prefix of LOOP that is a loop only becomes one at its very end, past the last
    # checkpoint a stream reaches without flush.
    length = next(n for n in range(1, len(LOOP)) if scan_text(LOOP[:n], "reasoning"))
    text = LOOP[:length]
    detector = StreamDetector()
    fed = [detector.feed("reasoning", text[i : i + 7]) for i in range(0, len(text), 7)]
    assert not any(fed)
    hit = detector.flush("reasoning")
    assert hit is not None and hit.fired_at == length
    assert detector.flush("reasoning") is None  # reported once


def test_watermark_releases_healthy_text_but_holds_a_second_copy():
    detector = StreamDetector()
    healthy = "The reader validates the header, then every frame checksum in order. "
    for pos in range(0, len(healthy), 4):
        detector.feed("reasoning", healthy[pos : pos + 4])
    assert detector.safe_offset("reasoning") >= len(healthy) - 8  # at most a few chars held
    unit = "Now emit the grep call for the cleanup handler and retry. "
    detector.feed("reasoning", unit)
    detector.feed("reasoning", unit[:30])
    # the start of the second copy is held back: it looks exactly like a loop beginning
    assert detector.safe_offset("reasoning") <= len(healthy) + len(unit)


# An answer cut inside a code block: the continuation goes on from inside it.
SHOWN_IN_CODE = "Here is the function:\n\n```python\ndef fib(n):\n    if n < 2:\n        return n\n"
PROSE_LOOP = "The function adds the two numbers before it and returns the sum to the caller. " * 8


def test_a_continuation_cut_in_a_code_block_closes_it_and_loops_in_prose_are_found():
    # its first fence line closes the shown block: before, it opened one, and every loop of
    # the prose after it was read as code
    continuation = "    return fib(n - 1) + fib(n - 2)\n```\n\nIt recurses. " + PROSE_LOOP
    hits = _feed_all(StreamDetector(shown=SHOWN_IN_CODE), "text", continuation, step=3)
    assert len(hits) == 1 and hits[0].rule == "cycle"
    # one copy kept, after the code block
    assert hits[0].prune_offset == continuation.index(PROSE_LOOP) + len(PROSE_LOOP) // 8


def test_a_continuation_cut_in_a_code_block_reads_its_lines_as_code():
    # the same lines in a fresh answer's prose are a loop; inside the shown block they are
    # code, judged as the uncut answer's code would be
    code = "print('-' * 40)\nprint('done')\n" * 10 + "```\n"
    assert _feed_all(StreamDetector(), "text", code, step=3)
    assert _feed_all(StreamDetector(shown=SHOWN_IN_CODE), "text", code, step=3) == []
    assert _feed_all(StreamDetector(), "text", SHOWN_IN_CODE + code, step=3) == []


@pytest.mark.parametrize(
    ("shown", "fenced"),
    [
        ("", False),
        ("Some prose.\n", False),
        ("```python\nx = 1\n", True),
        ("```python\nx = 1\n```\n", False),
        ("```python\nx = 1\n```\nText\n~~~\ncode", True),
        ("Text\n```", True),  # a fence line, though unended
        ("Inline ``` marks in prose\n", False),
    ],
)
def test_ends_in_fence(shown, fenced):
    from looprescue.detect.segment import ends_in_fence

    assert ends_in_fence(shown) is fenced


def test_a_request_read_piece_by_piece_bounds_a_list_as_the_whole_request_does():
    # a session's scan keeps the largest count as the human's messages come, instead of
    # reading them all again for every answer: the bound is the same
    from looprescue.detect.asked import largest_count

    request = ["Write a helper for the parser.", "Now give me 60 sample rows.", "Thanks, go on."]
    rows = "".join(f'{{"id": {n}, "name": "sample", "active": true}}\n' for n in range(1, 150))
    text = "Here are the rows:\n\n" + rows
    whole = scan_text(text, "text", request=request)
    kept = max(largest_count(piece) for piece in request)
    assert whole and whole[0].rule == "counted"
    assert scan_text(text, "text", request=request, asked_up_to=kept) == whole
    # and a lower count kept moves the cut (to the 40 items any list may have): it is what
    # bounds the list
    earlier = scan_text(text, "text", request=request, asked_up_to=5)
    assert earlier and earlier[0].prune_offset < whole[0].prune_offset
