"""How long rescue holds healthy text back, and what of a loop gets out (make bench).

The rescue engine (the real one, no I/O) is fed one block at a time in 3-char deltas, one
every 25 ms of virtual time: 120 chars/s, a typical streaming rate. A char's added delay is the
time from its delta's arrival to the engine releasing it; nothing sleeps.

* Healthy text: the records labelled ``normal`` of ``corpus/healthy.jsonl`` (real long answers
  and reasoning traces of models), of ``corpus/smollm2.jsonl``, and of ``corpus/dev.jsonl``.
* Loops: the records labelled ``loop`` of ``corpus/smollm2.jsonl`` and of the dev corpus. Each
  is fed until the engine cuts it; ``leaked`` is the engine's own ``leaked_loop_chars``: loop
  text past the prune point (past the one copy a periodic loop may keep, any of a pool) that
  had reached the client when the loop was confirmed. ``leaking (pools)``: loops with any
  leaked char, and of the pool loops, those of which any phrase got out.

The curve runs ``holdMaxMs`` (and a few ``holdMaxChars``) from no bound down; the default's row
is marked. ``python -m benchmarks.bench_holdback 800/none none/120`` measures given bounds.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from looprescue.config import LoopRescueConfig
from looprescue.corpus import Record, load_corpus
from looprescue.rescue.engine import RescueEngine
from looprescue.rescue.events import (
    BlockStarted,
    BlockStopped,
    EmitDelta,
    MessageStarted,
    ReasoningDelta,
    TextDelta,
)
from looprescue.wire.anthropic import AnthropicWire

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "corpus" / "healthy.jsonl"
SMOLLM2 = ROOT / "corpus" / "smollm2.jsonl"
DEV = ROOT / "corpus" / "dev.jsonl"
DELTA_CHARS = 3
CHARS_PER_S = 120
DELTA_MS = DELTA_CHARS * 1000 / CHARS_PER_S
# (holdMaxMs, holdMaxChars); no bound first: the watermark alone, as before the bounds
BOUNDS: tuple[tuple[int | None, int | None], ...] = (
    (None, None),
    (4000, None),
    (2000, None),
    (1000, None),
    (800, None),
    (500, None),
    (250, None),
    (None, 120),
    (None, 60),
)


def _records(path: Path, label: str) -> list[Record]:
    return [r for r in load_corpus(path) if r.label == label]


def _request(record: Record) -> dict:
    # the record's prompt when it has one: the engine reads the ranges it asks for
    prompt = record.prompt or "Answer the question."
    return {"model": "bench", "stream": True, "messages": [{"role": "user", "content": prompt}]}


def _deltas(text: str) -> Iterable[str]:
    return (text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS))


@dataclass
class Block:
    delays_ms: list[float]  # per released char
    held: list[int]  # chars held after each delta
    cut: bool
    leaked: int
    kept: int


def stream_block(
    record: Record, hold: tuple[int | None, int | None], text: str | None = None
) -> Block:
    """One block through a fresh engine in ``cut`` mode, the clock told before each delta as
    the proxy tells it before each read: the client's view and the stats."""
    config = LoopRescueConfig(mode="cut", holdMaxMs=hold[0], holdMaxChars=hold[1])
    engine = RescueEngine(config, AnthropicWire(), _request(record))
    engine.feed(MessageStarted("bench", "bench"))
    engine.feed(BlockStarted(0, record.channel))
    kind = ReasoningDelta if record.channel == "reasoning" else TextDelta
    text = record.text if text is None else text
    arrivals: list[float] = []  # arrival time of every char fed, by offset
    delays: list[float] = []
    held: list[int] = []
    released = 0
    now = 0.0
    cut = False
    for piece in _deltas(text):
        now += DELTA_MS
        arrivals.extend([now] * len(piece))
        out = engine.tick(now) + engine.feed(kind(0, piece))
        for item in out:
            if type(item) is EmitDelta:
                for arrival in arrivals[released : released + len(item.text)]:
                    delays.append(now - arrival)
                released += len(item.text)
        if engine.done:
            cut = True
            break
        held.append(len(arrivals) - released)
    if not cut:
        for item in engine.feed(BlockStopped(0)):
            if type(item) is EmitDelta:
                delays.extend(now - a for a in arrivals[released : released + len(item.text)])
                released += len(item.text)
    stats = engine.stats
    return Block(delays, held, cut, stats.leaked_loop_chars, stats.kept_loop_chars)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Row:
    hold: tuple[int | None, int | None]
    delays: list[float]
    held: list[int]
    loops: int
    cut: int
    leaking: int  # loops with any leaked char
    pools: int  # pool loops, and those of which any char got out
    pools_leaking: int
    leaked: int  # leaked chars over all loops
    worst: int  # most leaked chars of one loop
    worst_id: str


def measure(hold: tuple[int | None, int | None], healthy: list[Record], loops: list[Record]) -> Row:
    delays: list[float] = []
    held: list[int] = []
    for record in healthy:
        block = stream_block(record, hold)
        if block.cut:
            raise RuntimeError(f"{record.id}: a healthy record was cut (hold {hold})")
        delays += block.delays_ms
        held += block.held
    cut = leaking = leaked = worst = pools = pools_leaking = 0
    worst_id = "-"
    for record in loops:
        block = stream_block(record, hold, record.scored_text())
        cut += block.cut
        leaking += block.leaked > 0
        if record.kind == "pool":
            pools += 1
            pools_leaking += block.leaked > 0
        leaked += block.leaked
        if block.leaked > worst:
            worst, worst_id = block.leaked, record.id
    return Row(
        hold, delays, held, len(loops), cut, leaking, pools, pools_leaking, leaked, worst, worst_id
    )


def main(argv: Sequence[str] = ()) -> None:
    healthy = _records(HEALTHY, "normal") + _records(SMOLLM2, "normal") + _records(DEV, "normal")
    loops = _records(SMOLLM2, "loop") + _records(DEV, "loop")
    chars = sum(len(r.text) for r in healthy)
    config = LoopRescueConfig()
    default = (config.holdMaxMs, config.holdMaxChars)
    print(
        f"hold-back: {len(healthy)} healthy blocks ({chars} chars), {len(loops)} loops; "
        f"{DELTA_CHARS}-char deltas at {CHARS_PER_S} chars/s (virtual time)"
    )
    print(
        "  holdMaxMs / holdMaxChars | delay p50 / p90 / p99 / max ms"
        " | held chars p50 / p90 / p99 / max | loops cut | leaking (pools) | leaked chars"
        " (worst: record)"
    )
    # argv: MS/CHARS pairs, e.g. 800/none
    bounds = [_bound(a) for a in argv] or list(BOUNDS)
    for hold in bounds:
        row = measure(hold, healthy, loops)
        d, h = row.delays, row.held
        name = "/".join("none" if b is None else str(b) for b in hold)
        mark = " (default)" if hold == default else ""
        print(
            f"  {name + mark:>24s} | {percentile(d, 0.5):5.0f} / {percentile(d, 0.9):5.0f} / "
            f"{percentile(d, 0.99):5.0f} / {max(d):6.0f} | {percentile(h, 0.5):4.0f} / "
            f"{percentile(h, 0.9):4.0f} / {percentile(h, 0.99):5.0f} / {max(h):5d} | "
            f"{row.cut}/{row.loops} | {row.leaking} ({row.pools_leaking}/{row.pools}) | "
            f"{row.leaked} "
            f"({row.worst}: {row.worst_id})",
            flush=True,
        )
    # The Chinese blocks alone, with the watermark alone: widths count a CJK char as two, and
    # the blocks above are mostly English.
    chinese = [r for r in healthy if _mostly_chinese(r.text)]
    row = measure((None, None), chinese, [])
    d, h = row.delays, row.held
    print(
        f"  Chinese blocks ({len(chinese)}, {sum(len(r.text) for r in chinese)} chars), no bound:"
        f" delay {percentile(d, 0.5):.0f} / {percentile(d, 0.9):.0f} / "
        f"{percentile(d, 0.99):.0f} / {max(d):.0f} ms, held chars {percentile(h, 0.5):.0f} / "
        f"{percentile(h, 0.9):.0f} / {percentile(h, 0.99):.0f} / {max(h)}",
        flush=True,
    )


def _mostly_chinese(text: str) -> bool:
    """A quarter of the chars or more are CJK ideographs."""
    return 4 * sum("\u4e00" <= char <= "\u9fff" for char in text) >= len(text)


def _bound(arg: str) -> tuple[int | None, int | None]:
    ms, _, chars = arg.partition("/")
    return tuple(None if b in ("", "none") else int(b) for b in (ms, chars))  # type: ignore


if __name__ == "__main__":
    main(sys.argv[1:])
