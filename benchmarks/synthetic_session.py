"""A large synthetic DSH session built by repeating the turns of real fixture sessions.

``build_large_session(path, min_uncompressed_bytes)`` writes a valid multi-frame zstd v4 log:
the header and session-settings events of a real fixture, then copies of the first turn of
several fixtures (a reasoning loop, a verbatim cycle, a tool loop, a healthy answer, a stream
cut with a retry) one after another, until the decompressed text reaches the requested size.
Each copy gets fresh seqs (every seq reference remapped), a new turn number and later times,
and keeps the frame batching DSH used for it, so readers see what DSH would have written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import zstandard

# the DSH sessions recorded into the repository (tests/fixtures/sessions/README.md)
FIXTURE_SESSIONS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sessions"
TEMPLATE_SCENARIOS = (
    "a_reasoning_loop",
    "b_verbatim_cycle",
    "d_tool_loop",
    "g_healthy_long_answer",
    "h_stream_cut",
)
SEQ_LIST_KEYS = ("sourceEventSeqs",)
DATA_SEQ_LIST_KEYS = ("messageSeqs", "shadowedSeqs")
DATA_SEQ_KEYS = ("throughSeq",)


def _frames_of(log: Path) -> list[list[bytes]]:
    """The lines of each zstd frame of a fixture log."""
    data = log.read_bytes()
    frames = []
    while data:
        decoder = zstandard.ZstdDecompressor().decompressobj()
        content = decoder.decompress(data)
        data = decoder.unused_data
        frames.append(content.splitlines())
    return frames


class _TurnTemplate:
    """The first turn of a fixture: its events grouped in DSH's frames, seqs made relative."""

    def __init__(self, scenario: str) -> None:
        frames = _frames_of(FIXTURE_SESSIONS / scenario / "session" / "session.v4.jsonl.zstd")
        self.batches: list[list[dict]] = []
        started = False
        for lines in frames[1:]:
            batch = []
            for line in lines:
                event = json.loads(line)
                if event["type"] == "turn/start":
                    started = True
                if started:
                    batch.append(event)
                if event["type"] == "turn/end" and started:
                    break
            if batch:
                self.batches.append(batch)
            if batch and batch[-1]["type"] == "turn/end":
                break
        first = self.batches[0][0]
        self.first_seq = first["seq"]
        self.first_time = first["time"]
        last = self.batches[-1][-1]
        self.events = sum(len(b) for b in self.batches)
        self.duration = last["time"] - self.first_time + 1

    def render(self, seq0: int, time0: int, turn: int) -> list[bytes]:
        """The lines of one copy, as frames (each frame's lines joined)."""
        shift = seq0 - self.first_seq
        frames = []
        for batch in self.batches:
            lines = [_encode(_renumber(e, shift, time0 - self.first_time, turn)) for e in batch]
            frames.append(b"".join(line + b"\n" for line in lines))
        return frames


def _renumber(event: dict, shift: int, time_shift: int, turn: int) -> dict:
    out = dict(event)
    out["seq"] = event["seq"] + shift
    out["time"] = event["time"] + time_shift
    for key in SEQ_LIST_KEYS:
        if key in out:
            out[key] = [s + shift for s in out[key]]
    op = out.get("surfaceOp")
    if isinstance(op, dict):
        out["surfaceOp"] = {
            **op,
            "startSeq": op["startSeq"] + shift,
            "endSeq": op["endSeq"] + shift,
        }
    data = out.get("data")
    if isinstance(data, dict):
        data = dict(data)
        for key in DATA_SEQ_LIST_KEYS:
            if isinstance(data.get(key), list):
                data[key] = [s + shift for s in data[key]]
        for key in DATA_SEQ_KEYS:
            if isinstance(data.get(key), int):
                data[key] = data[key] + shift
        if "turn" in data:
            data["turn"] = turn
        out["data"] = data
    return out


def _encode(event: dict) -> bytes:
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def build_large_session(path: Path, min_uncompressed_bytes: int) -> Path:
    """Write a synthetic session log of at least ``min_uncompressed_bytes`` decompressed bytes
    to ``path`` (a ``session.v4.jsonl.zstd`` in a session dir of its own); returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    base = FIXTURE_SESSIONS / TEMPLATE_SCENARIOS[0] / "session" / "session.v4.jsonl.zstd"
    head_frames = _frames_of(base)
    header = json.loads(head_frames[0][0])
    header["id"] = path.parent.name
    templates = [_TurnTemplate(s) for s in TEMPLATE_SCENARIOS]
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=False)
    written = 0
    with open(path, "wb") as out:

        def emit(content: bytes) -> None:
            nonlocal written
            out.write(compressor.compress(content))
            written += len(content)

        emit(_encode(header) + b"\n")
        # Session settings (seq 0..) as DSH writes them before the first turn.
        settings = [json.loads(x) for x in head_frames[1]]
        settings = [e for e in settings if e["type"] != "turn/start"]
        emit(b"".join(_encode(e) + b"\n" for e in settings))
        seq = len(settings)
        time = settings[-1]["time"] + 1
        turn = 1
        while written < min_uncompressed_bytes:
            template = templates[(turn - 1) % len(templates)]
            for frame in template.render(seq, time, turn):
                emit(frame)
            seq += template.events
            time += template.duration
            turn += 1
    return path


if __name__ == "__main__":
    target = build_large_session(Path(sys.argv[1]), int(float(sys.argv[2]) * 1_000_000))
    print(f"wrote {target} ({target.stat().st_size:,} bytes compressed)")
