"""What the zero-leak watermark costs: CPU per delta, and how long healthy text waits (make bench).

A proxy in ``rescue`` mode releases each channel up to ``safe_offset`` after every delta and the
rest when the block ends. Deltas arrive every ``PACING_MS`` (virtual time, nothing sleeps); a
char's delay is the time from its delta's arrival to its release. Healthy texts are the normal
records of the dev corpus (reasoning and text) plus the generated healthy mixed text, in random
2-6 char deltas. CPU time per ``safe_offset`` call is the best of a few passes.
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path

from benchmarks.textgen import healthy_text
from looprescue.corpus import load_corpus, random_deltas
from looprescue.detect import StreamDetector

PACING_MS = 50
CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "dev.jsonl"


def _delays(text: str, channel: str, seed: int) -> list[float]:
    """Per-char release delay (ms) of one block streamed through the watermark."""
    detector = StreamDetector(watch="both")
    rng = random.Random(seed)
    delays: list[float] = []
    arrivals: list[float] = []  # arrival time of each char not yet released
    released = 0
    now = 0.0
    for delta in random_deltas(text, rng):
        now += PACING_MS
        arrivals.extend([now] * len(delta))
        if detector.feed(channel, delta) is not None:
            return []  # not healthy after all: not part of this measure
        safe = detector.safe_offset(channel)
        for arrival in arrivals[: safe - released]:
            delays.append(now - arrival)
        del arrivals[: safe - released]
        released = max(released, safe)
    if detector.flush(channel) is not None:
        return []
    delays.extend(now - arrival for arrival in arrivals)  # the block ends: all goes out
    return delays


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def _cpu_per_call(text: str, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        detector = StreamDetector(watch="both")
        feed, safe = detector.feed, detector.safe_offset
        calls = 0
        start = time.process_time()
        for pos in range(0, len(text), 3):
            if feed("reasoning", text[pos : pos + 3]) is not None:
                detector.reset("reasoning")
            else:
                safe("reasoning")
                calls += 1
        best = min(best, (time.process_time() - start) / calls)
    return best


def main() -> None:
    print(f"watermark: safe_offset after every delta, deltas every {PACING_MS} ms (virtual)")
    records = [r for r in load_corpus(CORPUS) if r.label == "normal"]
    texts = {"reasoning": [], "text": []}
    for record in records:
        texts[record.channel].append(record.text)
    texts["reasoning"].append(healthy_text(60_000, seed=7))
    for channel, blocks in texts.items():
        delays = [d for i, block in enumerate(blocks) for d in _delays(block, channel, seed=i)]
        if not delays:
            continue
        held = sum(1 for d in delays if d > 0) / len(delays)
        print(
            f"  healthy {channel:9s} {len(delays):7d} chars: added delay per char p50 "
            f"{_percentile(delays, 0.5):5.0f} ms, p90 {_percentile(delays, 0.9):5.0f} ms, "
            f"p99 {_percentile(delays, 0.99):5.0f} ms, mean {statistics.fmean(delays):5.0f} ms; "
            f"{held:.0%} of chars wait at least one delta"
        )
    cost = _cpu_per_call(healthy_text(250_000, seed=1))
    print(f"  CPU per safe_offset call (3-char deltas, healthy mixed): {cost * 1e6:5.1f} µs")


if __name__ == "__main__":
    main()
