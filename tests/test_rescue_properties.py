"""Chunking properties of the rescue engine: how a stream is split never changes the outcome."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.test_rescue_engine import (
    Script,
    check_well_formed,
    detected_loops,
    engine_for,
    normal_records,
    record,
    run,
)

from looprescue.detect import scan_text
from looprescue.rescue.events import (
    BlockStarted,
    BlockStopped,
    EmitDelta,
    FinishReported,
    MessageEnded,
    MessageStarted,
    ReasoningDelta,
    TextDelta,
)

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def split(text: str, sizes: list[int]) -> list[str]:
    pieces, position, k = [], 0, 0
    while position < len(text):
        size = sizes[k % len(sizes)]
        pieces.append(text[position : position + size])
        position += size
        k += 1
    return pieces


def stream(channel: str, pieces: list[str]) -> list[Any]:
    delta = ReasoningDelta if channel == "reasoning" else TextDelta
    return [
        MessageStarted("m", "x"),
        BlockStarted(0, channel),  # type: ignore[arg-type]
        *[delta(0, p) for p in pieces],
        BlockStopped(0),
        FinishReported("stop", "end_turn"),
        MessageEnded(),
    ]


chunk_sizes = st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=12)


@SETTINGS
@given(rec=st.sampled_from(normal_records()), sizes=chunk_sizes)
def test_healthy_text_arrives_complete_in_any_chunking(
    rec: dict[str, Any], sizes: list[int]
) -> None:
    engine = engine_for()
    result = run(engine, stream(rec["channel"], split(rec["text"], sizes)))
    check_well_formed(result)
    assert result.content(rec["channel"]) == rec["text"]
    assert not result.resumes and not result.markers()


@SETTINGS
@given(record_id=st.sampled_from([r["id"] for r in detected_loops()]), sizes=chunk_sizes)
def test_loop_never_reaches_the_client_in_any_chunking(record_id: str, sizes: list[int]) -> None:
    rec = record(record_id)
    (hit,) = scan_text(rec["text"], rec["channel"])
    engine = engine_for()
    result = run(
        engine, stream(rec["channel"], split(rec["text"], sizes)), [Script(text="ok").events()]
    )
    check_well_formed(result)
    released = "".join(
        i.text for i in result.items if isinstance(i, EmitDelta) and i.kind == rec["channel"]
    )
    continuation = "ok" if rec["channel"] == "text" else ""
    assert released == rec["text"][: hit.prune_offset] + continuation
    assert engine.stats.leaked_loop_chars == 0
    assert len(result.resumes) == 1


@SETTINGS
@given(sizes=chunk_sizes, seed=st.integers(0, 1000))
def test_two_channel_healthy_stream_in_any_chunking(sizes: list[int], seed: int) -> None:
    normals = normal_records()
    reasoning = next(r for r in normals if r["channel"] == "reasoning")["text"]
    text = normals[seed % len(normals)]["text"]
    script = Script(reasoning=reasoning, text=text, seed=seed)
    result = run(engine_for(), script.events())
    check_well_formed(result)
    assert result.content("reasoning") == reasoning and result.content("text") == text
