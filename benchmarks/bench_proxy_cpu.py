"""Proxy CPU per relayed upstream chunk, against a minimal asyncio byte relay in the same run.

200 concurrent Anthropic SSE streams, each delta 20 ms after the last, go through each target:
the byte relay (``proxy_fixtures.serve_byte_relay``: bytes copied both ways, unparsed), then
``looprescue proxy`` in ``observe`` and ``rescue``, and the same server with a detector that
never fires nor holds (the proxy's own cost without the detector's). The CPU time of the
target process (user + system, from /proc) over a run, divided by the upstream chunks it
relayed, is the figure; ratios are against the relay. Targets alternate within each round; the
figure is the median over rounds. Every stream's text is checked to arrive complete. The last
target relays the stream untouched through the same server (no model matches): the cost of
the HTTP stack alone. The proxy runs with its defaults (in ``rescue``, ``proxy.coalesceMs``:
the reads of the last 100 ms go to the engine together), with 50 ms, and, in the "read by
read" row, with each read handed on as it comes. ``BENCH_PROXY_BEFORE=<other checkout>/src``
adds that checkout's ``observe`` and ``rescue`` to the same rounds: before and after figures
from one run.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable

from benchmarks.bench_proxy import bench_text
from benchmarks.proxy_fixtures import (
    Child,
    anthropic_frames,
    post_stream,
    proxy_process,
    relay_process,
    upstream_process,
)

STREAMS = 200
PACE_MS = 20.0
DELTAS = 100
CHUNK_CHARS = 6
ROUNDS = 5
TEXT = bench_text(DELTAS * CHUNK_CHARS, seed=7)


FRAMES = anthropic_frames("", TEXT, PACE_MS, CHUNK_CHARS)
REQUEST = json.dumps(
    {
        "model": "deepseek-flash",
        "stream": True,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Write the benchmark text."}],
    }
).encode()


def received_text(body: bytes) -> str:
    pieces = []
    for line in body.split(b"\n"):
        if line.startswith(b"data:") and b"text_delta" in line:
            pieces.append(json.loads(line[5:])["delta"]["text"])
    return "".join(pieces)


async def run_streams(port: int, streams: int) -> list[str]:
    async def one(number: int) -> str:
        await asyncio.sleep(number * PACE_MS / 1000 / streams)  # staggered arrivals
        headers = {
            "x-api-key": "sk-bench",
            "anthropic-version": "2023-06-01",
            "x-looprescue-session": f"bench-{number}",
        }
        outcome = await post_stream(port, "/v1/messages", REQUEST, headers)
        if outcome.status != 200 or outcome.error:
            raise RuntimeError(f"stream {number}: HTTP {outcome.status} {outcome.error}")
        return received_text(outcome.body)

    return await asyncio.gather(*(one(n) for n in range(streams)))


def measure(target: Child, streams: int = STREAMS) -> float:
    """CPU seconds of ``target`` per relayed upstream chunk over one run of ``streams``."""
    before = target.cpu()
    texts = asyncio.run(run_streams(target.port, streams))
    after = target.cpu()
    if any(text != TEXT for text in texts):
        raise RuntimeError(f"port {target.port}: a stream's text differs from the upstream's")
    return (after - before) / (streams * len(FRAMES))


def targets(upstream_url: str, upstream_port: int) -> dict[str, Callable[[], Child]]:
    if os.environ.get("BENCH_PROXY_SRC"):  # another checkout: it may not take a detector
        return {
            "byte relay (baseline)": lambda: relay_process(upstream_port),
            "proxy observe": lambda: proxy_process(upstream_url, "observe"),
            "proxy rescue": lambda: proxy_process(upstream_url, "rescue"),
        }
    before = os.environ.get("BENCH_PROXY_BEFORE")
    earlier: dict[str, Callable[[], Child]] = {}
    if before:
        earlier = {
            f"before: proxy {mode}": lambda mode=mode: proxy_process(upstream_url, mode, src=before)
            for mode in ("observe", "rescue")
        }
    return {
        "byte relay (baseline)": lambda: relay_process(upstream_port),
        **earlier,
        "proxy observe": lambda: proxy_process(upstream_url, "observe"),
        "proxy rescue": lambda: proxy_process(upstream_url, "rescue"),
        # the reads of the last 50 ms to the engine together (proxy.coalesceMs=50), and each
        # read as it comes (proxy.coalesceMs=0)
        "proxy rescue, reads of 50 ms": lambda: proxy_process(
            upstream_url, "rescue", "--set", "proxy.coalesceMs=50"
        ),
        "proxy rescue, read by read": lambda: proxy_process(
            upstream_url, "rescue", "--set", "proxy.coalesceMs=0"
        ),
        "proxy observe, no-op detector": lambda: proxy_process(
            upstream_url, "observe", noop_detector=True
        ),
        "proxy rescue, no-op detector": lambda: proxy_process(
            upstream_url, "rescue", noop_detector=True
        ),
        # the same server relaying the stream untouched (no model matches): the floor of the
        # HTTP stack (the proxy's server + the upstream client) without any parsing
        "proxy relay path": lambda: proxy_process(upstream_url, "rescue", "--set", "models=[none]"),
    }


def main() -> None:
    upstream = upstream_process(json.dumps({"default": FRAMES}))
    children: dict[str, Child] = {}
    try:
        for name, start in targets(upstream.base_url, upstream.port).items():
            children[name] = start()
        for child in children.values():  # warm up imports, caches, connection pools
            measure(child, 20)
        figures: dict[str, list[float]] = {name: [] for name in children}
        for _ in range(ROUNDS):
            for name, child in children.items():
                figures[name].append(measure(child))
                time.sleep(0.5)
        per_chunk = {name: statistics.median(values) for name, values in figures.items()}
        relay = per_chunk["byte relay (baseline)"]
        print(
            f"{STREAMS} Anthropic SSE streams at once, one {CHUNK_CHARS}-char text delta every "
            f"{PACE_MS:g} ms ({len(FRAMES)} upstream chunks per stream), {os.cpu_count()} CPUs; "
            f"CPU time of the target process per relayed upstream chunk, median of {ROUNDS} "
            "interleaved rounds."
        )
        print(f"{'target':<32} {'us/chunk':>9} {'x relay':>8}")
        for name, value in per_chunk.items():
            print(f"{name:<32} {value * 1e6:>9.1f} {value / relay:>7.2f}x")
        split = {
            mode: (per_chunk[f"proxy {mode}, no-op detector"], per_chunk[f"proxy {mode}"])
            for mode in ("observe", "rescue")
            if f"proxy {mode}, no-op detector" in per_chunk
        }
        for mode, (own, full) in split.items():
            print(
                f"split, {mode}: proxy and engine {own * 1e6:.1f} us/chunk "
                f"({own / relay:.2f}x relay), detector {(full - own) * 1e6:.1f} us/chunk"
            )
    finally:
        for child in children.values():
            child.close()
        upstream.close()


if __name__ == "__main__":
    main()
