"""The synthetic large-session builder used by the benchmarks writes a log DSH's rules accept."""

from __future__ import annotations

from benchmarks.synthetic_session import build_large_session

from looprescue.dsh import open_log
from looprescue.dsh.findings import scan_events
from looprescue.dsh.frames import iter_frames


def test_synthetic_session_is_a_valid_log_of_the_requested_size(tmp_path):
    path = build_large_session(tmp_path / "session-big" / "session.v4.jsonl.zstd", 2_000_000)
    frames = list(iter_frames(path))
    assert sum(len(f.content) for f in frames) >= 2_000_000
    assert frames[0].content.count(b"\n") == 1 and all(f.complete for f in frames)
    log = open_log(path)
    assert log.session_id == "session-big"
    events = list(log.events())  # strict: contiguous seqs, envelope rules
    assert log.warnings == []
    turns = [e["data"]["turn"] for e in events if e["type"] == "turn/start"]
    assert turns == list(range(1, len(turns) + 1)) and len(turns) > 20
    times = [e["time"] for e in events]
    assert times == sorted(times)
    by_seq = {e["seq"]: e for e in events}
    for event in events:
        for ref in event.get("sourceEventSeqs", []):
            assert by_seq[ref]["type"] == "tool/call"  # references follow the renumbering
    loops = {(f.channel, f.excerpt[:9]) for f in scan_events(events, "s", str(path)) if f.is_loop}
    # the copied turns hold a_reasoning_loop's phrase rotation and b_verbatim_cycle's sentence
    assert ("reasoning", "Now. OK. ") in loops and any(channel == "text" for channel, _ in loops)
