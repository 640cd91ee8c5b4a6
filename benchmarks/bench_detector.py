"""Detector throughput, linearity, memory, each rule's cost, and the cost of rescanning instead
(make bench).

Times are CPU seconds of this process (time.process_time), best of a few passes: the machine is
shared, and CPU time is far less disturbed by other load than wall time. Every ratio compares
runs made here, now. ``BENCH_DETECTOR_BEFORE=<other checkout>/src`` also measures that
checkout's detector on the same 1 MB texts, each side in a fresh interpreter, alternating over
rounds, and prints now / before: the throughput change from one run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from benchmarks.textgen import healthy_text, looping_text
from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector, scan_text

DELTA = 3
MB = 1_000_000
TEXTS = {"healthy mixed": healthy_text, "looping": looping_text}
ROUNDS = 5  # before/after rounds; each side's pass is the better of two in its interpreter
ROOT = Path(__file__).resolve().parents[1]


def _best(
    runs: int, text: str, with_watermark: bool = False, cfg: DetectorConfig | None = None
) -> tuple[float, int]:
    """The fastest of ``runs`` passes: other load on a shared machine only ever slows a pass."""
    return min(_incremental(text, with_watermark, cfg) for _ in range(runs))


def _incremental(
    text: str, with_watermark: bool = False, cfg: DetectorConfig | None = None
) -> tuple[float, int]:
    """Feed ``text`` in 3-char deltas; on a hit start the channel afresh (as a resumed stream
    would). Returns (seconds, hits)."""
    detector = StreamDetector(cfg or DetectorConfig(), watch="both")
    feed, safe = detector.feed, detector.safe_offset
    hits = 0
    start = time.process_time()
    for pos in range(0, len(text), DELTA):
        if feed("reasoning", text[pos : pos + DELTA]) is not None:
            hits += 1
            detector.reset("reasoning")
        elif with_watermark:
            safe("reasoning")
    return time.process_time() - start, hits


def _naive(text: str) -> float:
    """The baseline: keep the whole buffer and rescan it from scratch on every delta."""
    start = time.process_time()
    buffer = ""
    for pos in range(0, len(text), DELTA):
        buffer += text[pos : pos + DELTA]
        if scan_text(buffer, "reasoning"):
            buffer = ""  # a loop: start afresh, as the incremental run does
    return time.process_time() - start


def _peak_memory(text: str) -> int:
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    _incremental(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


def _seconds_in_child(label: str, src: str) -> float:
    """CPU seconds of a pass over the 1 MB text of ``label`` (the better of two), in a fresh
    interpreter that imports looprescue from ``src`` (this repository's benchmarks make the
    text)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(ROOT)])}
    code = "import sys; from benchmarks.bench_detector import _child; _child(sys.argv[1])"
    out = subprocess.run(
        [sys.executable, "-c", code, label], env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def _child(label: str) -> None:
    text = TEXTS[label](1 * MB, seed=1)
    print(min(_incremental(text)[0] for _ in range(2)))


def compare_with(before: str) -> None:
    now = str(ROOT / "src")
    for label in TEXTS:
        times: dict[str, list[float]] = {"now": [], "before": []}
        for _ in range(ROUNDS):
            times["now"].append(_seconds_in_child(label, now))
            times["before"].append(_seconds_in_child(label, before))
        t_now, t_before = min(times["now"]), min(times["before"])
        print(
            f"  {label:14s} 1 MB, best of {ROUNDS} rounds: now {1 / t_now:5.2f} MB/s, before "
            f"{1 / t_before:5.2f} MB/s: now / before {t_before / t_now:4.2f}"
        )


def rule_costs() -> None:
    """Each rule's share of the time: the throughput with it switched off
    (``detector.ignore``) over the throughput with every rule on, alternating, in this run."""
    # (imported here: a child measuring an older checkout imports this module too)
    from looprescue.detect.registry import RULES

    texts = {label: make(MB // 2, seed=6) for label, make in TEXTS.items()}
    print("  cost of each rule: off / on throughput on 0.5 MB, best of 3 (1.00: costs nothing)")
    for names, _ in RULES:
        row = []
        for label, text in texts.items():
            on = off = float("inf")
            for _ in range(3):
                on = min(on, _incremental(text)[0])
                off = min(off, _incremental(text, cfg=DetectorConfig(ignore=names))[0])
            row.append(f"{label} {on / off:4.2f}")
        print(f"    {' and '.join(names):17s} " + ", ".join(row))


def main() -> None:
    print(f"detector: deltas of {DELTA} chars, one channel; MB = 10^6 chars")
    before = os.environ.get("BENCH_DETECTOR_BEFORE")
    if before:
        print(f"  against BENCH_DETECTOR_BEFORE={before}")
        compare_with(before)
    for label, make in TEXTS.items():
        small, large = make(1 * MB, seed=1), make(10 * MB, seed=2)
        t_small, hits_small = _best(3, small)
        t_large, hits_large = _best(2, large)
        print(
            f"  {label:14s} 1 MB: {1 / t_small:5.2f} MB/s ({hits_small} loops)   "
            f"10 MB: {10 / t_large:5.2f} MB/s ({hits_large} loops)   "
            f"time ratio 10MB/1MB: {t_large / t_small:5.2f} (linear = 10, limit 12)"
        )
        t_safe, _ = _incremental(small[: MB // 4], with_watermark=True)
        print(
            f"  {label:14s} 0.25 MB with safe_offset() after every delta (what a proxy does): "
            f"{0.25 / t_safe:5.2f} MB/s, {t_safe / (MB // 4 // DELTA) * 1e6:4.1f} µs per delta"
        )
        peak_small = _peak_memory(make(MB // 4, seed=3))
        peak_large = _peak_memory(make(4 * MB, seed=4))
        print(
            f"  {label:14s} peak memory while streaming: {peak_small / 1024:7.1f} KiB for 0.25 MB,"
            f" {peak_large / 1024:7.1f} KiB for 4 MB (bounded: must not grow with the text)"
        )
    rule_costs()
    for size in (4_000, 8_000, 16_000):
        text = healthy_text(size, seed=5)
        t_naive = _naive(text)
        t_inc, _ = _best(3, text)
        print(
            f"  naive rescan-per-delta baseline on {size // 1000} k chars: {t_naive:6.2f} s vs "
            f"{t_inc * 1000:6.1f} ms incremental: {t_naive / t_inc:7.0f}x slower"
        )


if __name__ == "__main__":
    main()
