"""Doctor throughput (events/s) and peak memory on the large synthetic sessions (make bench).

The sessions are the scan benchmark's (`benchmarks.synthetic_session`, 50 MB and 200 MB of
decompressed text). Every measurement runs in a fresh child process, so its peak RSS is its own;
each timing is the best of two runs. Modes, all over the same file:
  idle    imports only (the interpreter's own RSS),
  read    looprescue.dsh.open_log(...).events(): the baseline,
  doctor  read + every event through SessionAnalysis (what `looprescue doctor` does),
  fold    read in batches of BATCH events, only SessionAnalysis.feed timed.
Throughput should hold across sizes and peak memory must not grow with the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

from benchmarks.memory import peak_rss_mb
from benchmarks.synthetic_session import build_large_session

MB = 1_000_000
SIZES_MB = (50, 200)
MODES = ("idle", "read", "doctor", "fold")
BATCH = 1_000


def _measure(mode: str, path: Path) -> dict:
    """Runs in the child: one pass over ``path``."""
    from looprescue.doctor import SessionAnalysis
    from looprescue.dsh import open_log

    events = signals = 0
    seconds = 0.0
    if mode == "read":
        start = time.perf_counter()
        for _event in open_log(path).events():
            events += 1
        seconds = time.perf_counter() - start
    elif mode == "doctor":
        start = time.perf_counter()
        log = open_log(path)
        analysis = SessionAnalysis(log.session_id, header=log.header)
        for event in log.events():
            events += 1
            signals += len(analysis.feed(event))
        signals += len(analysis.finish())
        seconds = time.perf_counter() - start
    elif mode == "fold":
        log = open_log(path)
        analysis = SessionAnalysis(log.session_id, header=log.header)
        stream = log.events()
        while batch := list(islice(stream, BATCH)):
            feed = analysis.feed
            start = time.perf_counter()
            for event in batch:
                signals += len(feed(event))
            seconds += time.perf_counter() - start
            events += len(batch)
        start = time.perf_counter()
        signals += len(analysis.finish())
        seconds += time.perf_counter() - start
    return {"seconds": seconds, "events": events, "signals": signals, "peak_mb": peak_rss_mb()}


def _child(mode: str, path: Path) -> dict:
    command = [sys.executable, "-m", "benchmarks.bench_doctor", "--child", mode, str(path)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def main() -> None:
    print("doctor: synthetic sessions of repeated real fixture turns; MB = 10^6 bytes of")
    print("decompressed session text; peak = max RSS of a fresh child process")
    with tempfile.TemporaryDirectory(prefix="looprescue-bench-doctor-") as tmp:
        for size_mb in SIZES_MB:
            path = Path(tmp) / f"session-{size_mb}" / "session.v4.jsonl.zstd"
            build_large_session(path, size_mb * MB)
            runs = {
                mode: min((_child(mode, path) for _ in range(2)), key=lambda r: r["seconds"])
                for mode in MODES
            }
            read, doctor, fold = runs["read"], runs["doctor"], runs["fold"]
            assert read["events"] == doctor["events"] == fold["events"]
            assert doctor["signals"] == fold["signals"]
            events = read["events"]
            print(
                f"  {size_mb} MB session: {events:,} events, {doctor['signals']:,} signals; "
                f"idle interpreter {runs['idle']['peak_mb']:.0f} MB RSS"
            )
            for mode in ("read", "doctor", "fold"):
                r = runs[mode]
                print(
                    f"    {mode:7s} {events / r['seconds']:11,.0f} events/s  "
                    f"{r['seconds']:7.2f} s  = {r['seconds'] / read['seconds']:4.2f}x read   "
                    f"peak {r['peak_mb']:6.1f} MB"
                )
            print(
                f"    doctor adds {doctor['peak_mb'] - read['peak_mb']:+.1f} MB peak RSS over read"
            )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(_measure(sys.argv[2], Path(sys.argv[3]))))
    else:
        main()
