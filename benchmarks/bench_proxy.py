"""Rescue proxy overhead: added latency per chunk and streaming throughput, proxy vs direct.

Three processes on 127.0.0.1: the scripted upstream (from the test suite), the proxy
(``looprescue proxy --upstream ...``) and this client. Each configuration is measured against
the upstream directly and through the proxy in the same run, and reported as ratios.

* Latency: paced streams (one 6-char text delta every PACED_DELAY_MS); for every delta, the
  client's receive time minus the upstream's send time (one system-wide monotonic clock).
* Throughput: unpaced streams; text deltas delivered per second over all concurrent streams.

Streams carry healthy, non-repeating text (checked with the detector before the run), so the
proxy has nothing to cut; every stream's text is checked to arrive unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.proxy_fixtures import Child, proxy_process

REPO_ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = (1, 50, 200)
CHUNK_CHARS = 6
PACED_DELTAS = 25
PACED_DELAY_MS = 50.0
ROUNDS = 3  # targets alternate within a round; each figure is the median over rounds
# The default mode, and observe (pass-through plus detection) to separate holdback from transport.
PROXY_MODES = ("rescue", "observe")
BULK_DELTAS = 60
RUN_TIMEOUT_S = 180.0
# Upstream frames before the first text delta: message_start, ping, content_block_start.
FIRST_DELTA_EVENT = 3
TEXT_SEED = 20261129
# Paced streams of a real healthy answer too (corpus/healthy.jsonl's first record): the
# pseudo-words above are one run of short sentences, which the watermark holds as a phrase
# pool could begin there; a real answer is held the way the field sees it.
REAL_DELTAS = 120
REAL_CONCURRENCY = (1, 50)
# rescue variants measured on the real answer beside the default: no hold bound (the
# watermark alone, as before holdMaxMs) and reads handed on as they come (no coalescing)
REAL_VARIANTS = {
    "rescue unbounded": ("--set", "holdMaxMs=null"),
    "rescue coalesce 0": ("--set", "proxy.coalesceMs=0"),
}
HEALTHY = REPO_ROOT / "corpus" / "healthy.jsonl"


def real_text(chars: int = REAL_DELTAS * CHUNK_CHARS) -> str:
    with HEALTHY.open(encoding="utf-8") as handle:
        return json.loads(handle.readline())["text"][:chars]


def bench_text(chars: int, seed: int = TEXT_SEED) -> str:
    """Healthy prose-like text with no repetition: pseudo-words from a seeded generator."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    weights = [12, 9, 8, 8, 7, 7, 6, 6, 4, 4, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    words: list[str] = []
    length = 0
    while length < chars:
        word = "".join(rng.choices(letters, weights, k=rng.randint(2, 9)))
        if rng.random() < 0.08:
            word += "."
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:chars]


# --------------------------------------------------------------------------- upstream child


def serve_upstream_child() -> None:
    """Child process: a scripted upstream driven over stdin ("dump" / "quit")."""
    from tests.support.scripted_upstream import ScriptedResponse, ScriptedUpstream

    text = bench_text(max(PACED_DELTAS, BULK_DELTAS) * CHUNK_CHARS)
    real = real_text()

    def respond(request) -> ScriptedResponse:
        deltas = int(request.headers.get("x-bench-deltas", "1"))
        delay = float(request.headers.get("x-bench-delay-ms", "0")) / 1000
        source = real if request.headers.get("x-bench-text") == "real" else text
        return ScriptedResponse(
            text=source[: deltas * CHUNK_CHARS],
            delta_chars=(CHUNK_CHARS, CHUNK_CHARS),
            delay=delay,
            label="bench",
        )

    upstream = ScriptedUpstream(answer_titles=False, graceful_shutdown_seconds=1)
    upstream.add_rule(lambda request: True, respond, label="bench")
    upstream.start()
    print(json.dumps({"port": upstream.port}), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "dump":
            times = {r.headers.get("x-bench-stream", ""): r.event_times for r in upstream.requests}
            upstream.clear_requests()
            print(json.dumps(times), flush=True)
        elif command == "quit":
            break
    upstream.stop()


class UpstreamProcess:
    def __init__(self) -> None:
        code = "from benchmarks.bench_proxy import serve_upstream_child; serve_upstream_child()"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.port = json.loads(self._read_line())["port"]
        self.base_url = f"http://127.0.0.1:{self.port}"

    def _read_line(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"upstream child exited with {self.process.wait()}")
        return line

    def send_times(self) -> dict[str, list[float]]:
        self.process.stdin.write("dump\n")
        self.process.stdin.flush()
        return json.loads(self._read_line())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --------------------------------------------------------------------------- client


@dataclass
class StreamResult:
    stream_id: str
    started: float
    finished: float
    arrivals: list[float]  # receive time of each complete 6-char delta
    text: str


async def _post_streaming(
    port: int, path: str, body: bytes, headers: dict[str, str]
) -> AsyncIterator[bytes]:
    """POST over a fresh HTTP/1.1 connection; yields body bytes as they arrive.

    A minimal client on purpose: a shared httpx pool costs O(connections) per event and a
    client per stream costs a TLS context each, so either would dominate what is measured.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines += ["content-type: application/json", f"content-length: {len(body)}", "", ""]
        writer.write("\r\n".join(lines).encode() + body)
        status = (await reader.readline()).split(b" ", 2)
        response_headers: dict[bytes, bytes] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            response_headers[name.strip().lower()] = value.strip()
        if status[1] != b"200":
            raise RuntimeError(f"port {port}: HTTP {status[1].decode()}: {await reader.read()!r}")
        if response_headers.get(b"transfer-encoding", b"").lower() != b"chunked":
            while chunk := await reader.read(65536):
                yield chunk
            return
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                return
            chunk = await reader.readexactly(size + 2)
            yield chunk[:-2]
    finally:
        writer.close()


async def _one_stream(
    port: int,
    stream_id: str,
    deltas: int,
    delay_ms: float,
    start_after_s: float,
    kind: str = "synthetic",
) -> StreamResult:
    # Staggered starts, as real clients arrive: synchronous bursts would measure queueing.
    await asyncio.sleep(start_after_s)
    body = {
        "model": "deepseek-flash",
        "stream": True,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "Write the benchmark text."}],
    }
    headers = {
        "x-api-key": "sk-bench",
        "anthropic-version": "2023-06-01",
        "x-looprescue-session": stream_id,
        "x-bench-stream": stream_id,
        "x-bench-deltas": str(deltas),
        "x-bench-delay-ms": str(delay_ms),
        "x-bench-text": kind,
    }
    started = time.monotonic()
    arrivals: list[float] = []
    pieces: list[str] = []
    received = 0
    buffer = b""
    async for chunk in _post_streaming(port, "/v1/messages", json.dumps(body).encode(), headers):
        now = time.monotonic()
        buffer += chunk
        *frames, buffer = buffer.split(b"\n\n")
        for frame in frames:
            for line in frame.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("type") != "content_block_delta":
                    continue
                delta = event["delta"]
                if delta.get("type") == "text_delta":
                    pieces.append(delta["text"])
                    received += len(delta["text"])
                    while received >= (len(arrivals) + 1) * CHUNK_CHARS:
                        arrivals.append(now)
    return StreamResult(stream_id, started, time.monotonic(), arrivals, "".join(pieces))


async def _run_streams(
    port: int, label: str, streams: int, deltas: int, delay_ms: float, kind: str = "synthetic"
) -> list[StreamResult]:
    stagger_s = delay_ms / 1000 / streams
    tasks = [
        _one_stream(port, f"{label}-{i}", deltas, delay_ms, i * stagger_s, kind)
        for i in range(streams)
    ]
    return await asyncio.wait_for(asyncio.gather(*tasks), RUN_TIMEOUT_S)


def _check_texts(
    results: Sequence[StreamResult], deltas: int, where: str, kind: str = "synthetic"
) -> None:
    whole = (
        real_text() if kind == "real" else bench_text(max(PACED_DELTAS, BULK_DELTAS) * CHUNK_CHARS)
    )
    expected = whole[: deltas * CHUNK_CHARS]
    for result in results:
        if result.text != expected:
            raise RuntimeError(f"{where}: stream {result.stream_id} text differs from upstream's")


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class Figures:
    p50_ms: float
    p99_ms: float
    chunks_per_s: float


def _measure(
    upstream: UpstreamProcess, port: int, target: str, streams: int, round_no: int
) -> Figures:
    label = f"{target}-{streams}-{round_no}"
    paced = asyncio.run(_run_streams(port, label + "-paced", streams, PACED_DELTAS, PACED_DELAY_MS))
    _check_texts(paced, PACED_DELTAS, target)
    sent = upstream.send_times()
    latencies: list[float] = []
    for result in paced:
        times = sent[result.stream_id][FIRST_DELTA_EVENT : FIRST_DELTA_EVENT + PACED_DELTAS]
        latencies += [(got - put) * 1000 for got, put in zip(result.arrivals, times, strict=True)]
    bulk = asyncio.run(_run_streams(port, label + "-bulk", streams, BULK_DELTAS, 0.0))
    _check_texts(bulk, BULK_DELTAS, target)
    upstream.send_times()  # discard the bulk run's records
    wall = max(r.finished for r in bulk) - min(r.started for r in bulk)
    return Figures(
        p50_ms=statistics.median(latencies),
        p99_ms=_percentile(latencies, 0.99),
        chunks_per_s=streams * BULK_DELTAS / wall,
    )


def _measure_real(
    upstream: UpstreamProcess, port: int, target: str, streams: int, n: int
) -> Figures:
    """Added latency per delta (ms) of paced streams of the real answer: p50 and p99."""
    label = f"{target}-{streams}-{n}-real"
    paced = asyncio.run(
        _run_streams(port, label, streams, REAL_DELTAS, PACED_DELAY_MS, kind="real")
    )
    _check_texts(paced, REAL_DELTAS, target, kind="real")
    sent = upstream.send_times()
    latencies: list[float] = []
    for result in paced:
        times = sent[result.stream_id][FIRST_DELTA_EVENT : FIRST_DELTA_EVENT + REAL_DELTAS]
        latencies += [(got - put) * 1000 for got, put in zip(result.arrivals, times, strict=True)]
    return Figures(statistics.median(latencies), _percentile(latencies, 0.99), 0.0)


def _median_figures(figures: Sequence[Figures]) -> Figures:
    return Figures(
        p50_ms=statistics.median(f.p50_ms for f in figures),
        p99_ms=statistics.median(f.p99_ms for f in figures),
        chunks_per_s=statistics.median(f.chunks_per_s for f in figures),
    )


def _assert_text_is_healthy() -> None:
    from looprescue.detect import scan_text

    text = bench_text(max(PACED_DELTAS, BULK_DELTAS) * CHUNK_CHARS)
    for checked in (text, real_text()):
        hits = scan_text(checked, channel="text")
        if hits:
            raise RuntimeError(f"benchmark text trips the detector: {hits[0].rule}")


def _row(streams: int, target: str, figures: Figures, baseline: Figures | None) -> str:
    row = (
        f"{streams:>7}  {target:<14} {figures.p50_ms:>8.2f} {figures.p99_ms:>8.2f} "
        f"{figures.chunks_per_s:>9.0f}"
    )
    if baseline is None:
        return row
    return row + (
        f"  {figures.p50_ms - baseline.p50_ms:>+8.2f} {figures.p99_ms - baseline.p99_ms:>+8.2f} "
        f"{figures.p50_ms / baseline.p50_ms:>7.2f}x {figures.p99_ms / baseline.p99_ms:>7.2f}x "
        f"{figures.chunks_per_s / baseline.chunks_per_s:>7.2f}x"
    )


def main() -> None:
    _assert_text_is_healthy()
    upstream = UpstreamProcess()
    proxies: list[Child] = []
    try:
        targets = {"direct": upstream.port}
        for mode in PROXY_MODES:
            proxies.append(proxy_process(upstream.base_url, mode))
            targets[f"proxy {mode}"] = proxies[-1].port
        for target, port in targets.items():  # warm up imports, caches, the proxy's pool
            _measure(upstream, port, target, 4, 0)
        print(
            f"Anthropic SSE over 127.0.0.1, {CHUNK_CHARS}-char text deltas, {os.cpu_count()} CPUs. "
            f"Latency: {PACED_DELTAS} deltas {PACED_DELAY_MS:g} ms apart per stream, upstream "
            f"send to client receive. Throughput: {BULK_DELTAS} unpaced deltas per stream. "
            f"Median of {ROUNDS} interleaved rounds."
        )
        print(
            f"{'streams':>7}  {'target':<14} {'p50 ms':>8} {'p99 ms':>8} {'chunks/s':>9}"
            f"  {'+p50 ms':>8} {'+p99 ms':>8} {'p50 x':>8} {'p99 x':>8} {'thru x':>8}"
        )
        for streams in CONCURRENCY:
            rounds = [
                {t: _measure(upstream, port, t, streams, n) for t, port in targets.items()}
                for n in range(1, ROUNDS + 1)
            ]
            figures = {t: _median_figures([r[t] for r in rounds]) for t in targets}
            direct = figures["direct"]
            for target, measured in figures.items():
                baseline = None if target == "direct" else direct
                print(_row(streams, target, measured, baseline), flush=True)
        print(
            f"Real answer (corpus/healthy.jsonl's first, {REAL_DELTAS} deltas "
            f"{PACED_DELAY_MS:g} ms apart, 120 chars/s): added latency per delta, rescue "
            "against observe (same run)"
        )
        real_targets = dict(targets)
        for name, settings in REAL_VARIANTS.items():
            proxies.append(proxy_process(upstream.base_url, "rescue", *settings))
            real_targets[name] = proxies[-1].port
        for streams in REAL_CONCURRENCY:
            rounds = [
                {
                    t: _measure_real(upstream, port, t, streams, n)
                    for t, port in real_targets.items()
                }
                for n in range(1, ROUNDS + 1)
            ]
            figures = {t: _median_figures([r[t] for r in rounds]) for t in real_targets}
            observe = figures["proxy observe"]
            for target, measured in figures.items():
                line = f"{streams:>7}  {target:<17} {measured.p50_ms:>8.2f} {measured.p99_ms:>8.2f}"
                if "rescue" in target:
                    line += (
                        f"  over observe: {measured.p50_ms - observe.p50_ms:+.2f} ms p50, "
                        f"{measured.p99_ms - observe.p99_ms:+.2f} ms p99"
                    )
                print(line, flush=True)
    finally:
        for proxy in proxies:
            proxy.close()
        upstream.close()


if __name__ == "__main__":
    main()
