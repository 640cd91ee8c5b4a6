"""Soak: 200 concurrent streams through ``looprescue proxy`` for 60 s, healthy and not; then
2,000 idle connections and a slowloris run against the same process.

Each of 200 client slots runs streams back to back until the time is up, cycling through:
healthy answers, reasoning loops (cut and resumed into the same response), HTTP 503s, a
connection cut mid-stream, a stall past the proxy's idle limit, and clients that hang up
halfway. Every outcome is checked against what the client must get. Printed: unexpected
outcomes (must be 0), tasks and busy upstream connections left in the proxy once the traffic
stopped (0 and 0), its RSS at the start and at the end, and loops rescued out of loops sent.

The abuse row: 2,000 connections that send nothing (twice the proxy's ``maxConnections``)
and 200 that trickle a request head one byte a second (slowloris), while 20 clients stream
healthy answers back to back for ``ABUSE_S``. Printed: healthy streams answered in full out of
those sent (all must be), how the proxy ended the idle connections (closed for a newcomer or
at the keep-alive timeout) and the slow heads (408 at the header timeout), and its RSS before,
at the peak and after.
"""

from __future__ import annotations

import asyncio
import json
import resource
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable

from benchmarks.bench_proxy import bench_text
from benchmarks.proxy_fixtures import (
    Child,
    anthropic_frames,
    post_stream,
    soak_proxy_process,
    upstream_process,
)
from looprescue.detect import scan_text

DURATION_S = float(__import__("os").environ.get("BENCH_SOAK_S", "60"))
SLOTS = 200
PACE_MS = 20.0
IDLE_TIMEOUT_MS = 1500
STREAM_TIMEOUT_S = 30.0
HEALTHY = bench_text(240, seed=11)
# slot n runs MIX[(n + k) % len(MIX)] for its k-th stream: every kind keeps running throughout
MIX = ["healthy", "loop", "healthy", "503", "healthy", "cut", "loop", "stall", "abandon"]


def loop_text() -> str:
    """A reasoning loop from the labelled corpus that the detector confirms."""
    from tests.support.scripted_upstream import load_corpus

    for record in load_corpus():
        looping = record["label"] == "loop" and record["channel"] == "reasoning"
        if looping and len(record["text"]) <= 4096 and scan_text(record["text"], "reasoning"):
            return record["text"]
    raise RuntimeError("no short reasoning loop in the corpus")


def scenarios() -> dict[str, list[tuple[str | None, float]]]:
    healthy = anthropic_frames("", HEALTHY, PACE_MS)
    looping = anthropic_frames(loop_text(), "The answer.", PACE_MS / 4)
    cut: list[tuple[str | None, float]] = [*healthy[:12], (None, PACE_MS)]
    stall = [*healthy[:12], (healthy[12][0], IDLE_TIMEOUT_MS * 3.0), *healthy[13:]]
    return {
        "healthy": healthy,
        "abandon": healthy,
        "loop": looping,
        "loop:resume": anthropic_frames("Resuming without the loop.", "Resumed.", PACE_MS),
        "503": [("status:503", 0.0)],
        "cut": cut,
        "stall": stall,
    }


REQUEST = json.dumps(
    {
        "model": "deepseek-flash",
        "stream": True,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Soak."}],
    }
).encode()


def events_of(body: bytes) -> list[tuple[str, dict]]:
    out = []
    for frame in body.split(b"\n\n"):
        name, data = "", None
        for line in frame.split(b"\n"):
            if line.startswith(b"event:"):
                name = line[6:].strip().decode()
            elif line.startswith(b"data:"):
                data = json.loads(line[5:])
        if data is not None:
            out.append((name, data))
    return out


def texts_of(events: list[tuple[str, dict]], kind: str) -> str:
    return "".join(
        d["delta"].get(kind, "")
        for name, d in events
        if name == "content_block_delta" and isinstance(d.get("delta"), dict)
    )


def judge(kind: str, status: int, body: bytes, error: str | None) -> str | None:
    """Why this outcome is not what the client must get (None: it is)."""
    if kind == "abandon":
        return None if error == "abandoned" else f"abandon: {status} {error}"
    if kind == "503":
        return None if status == 503 else f"503: got {status} {error}"
    if status != 200 or error:
        return f"{kind}: HTTP {status} {error}"
    events = events_of(body)
    last = events[-1][0] if events else ""
    if kind == "healthy":
        ok = last == "message_stop" and texts_of(events, "text") == HEALTHY
        return None if ok else "healthy: content or end differs"
    if kind == "loop":
        reasoning = texts_of(events, "thinking")
        ok = last == "message_stop" and "〔" in reasoning and texts_of(events, "text") == "Resumed."
        return None if ok else "loop: not rescued"
    if kind in ("cut", "stall"):
        ok = last == "error" and sum(1 for n, _ in events if n in ("error", "message_stop")) == 1
        return None if ok else f"{kind}: no single in-band error at the end"
    return f"unknown kind {kind}"


async def soak(port: int) -> tuple[Counter, list[str]]:
    deadline = time.monotonic() + DURATION_S
    counts: Counter = Counter()
    problems: list[str] = []

    async def slot(number: int) -> None:
        await asyncio.sleep(number * PACE_MS / 1000 / 4)
        turn = 0
        while time.monotonic() < deadline:
            kind = MIX[(number + turn) % len(MIX)]
            turn += 1
            headers = {
                "x-api-key": "sk-soak",
                "anthropic-version": "2023-06-01",
                "x-looprescue-session": f"soak-{number}-{turn}",
                "x-bench-scenario": kind,
            }
            abandon = 600 if kind == "abandon" else None
            counts[kind] += 1
            try:
                outcome = await asyncio.wait_for(
                    post_stream(port, "/v1/messages", REQUEST, headers, abandon), STREAM_TIMEOUT_S
                )
            except asyncio.TimeoutError:
                problems.append(f"{kind}: no complete answer within {STREAM_TIMEOUT_S:g} s")
                continue
            problem = judge(kind, outcome.status, outcome.body, outcome.error)
            if problem is not None:
                problems.append(problem)

    await asyncio.gather(*(slot(n) for n in range(SLOTS)))
    return counts, problems


def stats(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/__bench/stats", timeout=10) as reply:
        return json.loads(reply.read())


def main() -> None:
    upstream = upstream_process(json.dumps(scenarios()))
    proxy = soak_proxy_process(
        upstream.base_url, "--set", f"proxy.upstreamIdleTimeoutMs={IDLE_TIMEOUT_MS}"
    )
    try:
        asyncio.run(soak_warmup(proxy.port))
        time.sleep(3.5)
        rss_idle = proxy.rss()
        before = stats(proxy.port)
        samples: list[tuple[float, int]] = []
        sampling = threading.Event()

        def sample() -> None:  # RSS every 5 s while the traffic runs
            while not sampling.wait(5.0):
                samples.append((time.monotonic() - started, proxy.rss()))

        started = time.monotonic()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        counts, problems = asyncio.run(soak(proxy.port))
        elapsed = time.monotonic() - started
        sampling.set()
        sampler.join()
        time.sleep(3.5)  # idle upstream connections expire after 2 s
        rss_end = proxy.rss()
        left = stats(proxy.port)
        loops = counts["loop"]
        print(
            f"{SLOTS} concurrent streams for {elapsed:.0f} s through looprescue proxy (rescue): "
            + ", ".join(f"{counts[k]} {k}" for k in sorted(counts))
        )
        print(f"unexpected outcomes: {len(problems)}")
        for problem, many in Counter(problems).most_common(5):
            print(f"  {many} x {problem}")
        print(
            f"proxy tasks: {before['tasks']} before the traffic, {left['tasks']} after it; "
            f"busy upstream connections after it: {left['busy_upstream']}"
        )
        under_load = [rss for at, rss in samples if at >= 10.0]
        start, end = under_load[0], under_load[-1]
        print(
            f"proxy RSS: {rss_idle / 1024:.1f} MiB idle before the traffic; under load "
            f"{start / 1024:.1f} MiB at 10 s, {end / 1024:.1f} MiB at {samples[-1][0]:.0f} s "
            f"({(end - start) / 1024:+.1f} MiB); {rss_end / 1024:.1f} MiB after it"
        )
        print(
            f"loops rescued: {left['rescues'] - before['rescues']} of {loops} sent "
            f"(leaked loop chars: {left['leaked_loop_chars']})"
        )
        report_abuse(proxy)
    finally:
        proxy.close()
        upstream.close()


ABUSE_S = 15.0
IDLE_CONNECTIONS = 2000
SLOW_HEADS = 200
HEALTHY_CLIENTS = 20


async def abuse(port: int, sample: Callable[[], None]) -> dict[str, int]:
    """Idle connections and slow heads held open while healthy streams run; what became of
    each (see the module's docstring)."""
    counts: Counter = Counter()
    deadline = time.monotonic() + ABUSE_S

    async def idle() -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts["idle refused at connect"] += 1
            return
        try:
            data = await asyncio.wait_for(reader.read(4096), ABUSE_S + 5)
            counts["idle closed" if not data else f"idle answered {data[9:12].decode()}"] += 1
        except (asyncio.TimeoutError, ConnectionError):
            counts["idle still open"] += 1
        writer.close()

    async def slow_head() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n" + b"x-slow: " + b"a" * 60
        try:
            for byte in head:
                writer.write(bytes([byte]))
                try:
                    data = await asyncio.wait_for(reader.read(4096), 1.0)
                except asyncio.TimeoutError:
                    continue
                counts[f"slow head answered {data[9:12].decode()}" if data else "slow closed"] += 1
                return
            counts["slow head still open"] += 1
        except ConnectionError:
            counts["slow head reset"] += 1
        finally:
            writer.close()

    async def healthy_client(number: int) -> None:
        turn = 0
        while time.monotonic() < deadline:
            turn += 1
            headers = {
                "x-api-key": "k",
                "x-bench-scenario": "healthy",
                "x-looprescue-session": f"abuse-{number}-{turn}",
            }
            counts["healthy sent"] += 1
            try:
                outcome = await asyncio.wait_for(
                    post_stream(port, "/v1/messages", REQUEST, headers), STREAM_TIMEOUT_S
                )
            except asyncio.TimeoutError:
                continue
            if judge("healthy", outcome.status, outcome.body, outcome.error) is None:
                counts["healthy ok"] += 1

    async def sampler() -> None:
        while time.monotonic() < deadline + 5:
            sample()
            await asyncio.sleep(1.0)

    idlers = [asyncio.ensure_future(idle()) for _ in range(IDLE_CONNECTIONS)]
    slow = [asyncio.ensure_future(slow_head()) for _ in range(SLOW_HEADS)]
    await asyncio.sleep(1.0)  # all of them held before the healthy traffic starts
    await asyncio.gather(
        sampler(), *(healthy_client(n) for n in range(HEALTHY_CLIENTS)), *idlers, *slow
    )
    return dict(counts)


def report_abuse(proxy: Child) -> None:
    # the bench holds 2,200 sockets of its own
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rss_before = proxy.rss()
    peak = [rss_before]
    counts = asyncio.run(abuse(proxy.port, lambda: peak.append(proxy.rss())))
    time.sleep(3.5)
    rss_after = proxy.rss()
    ended = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()) if not k.startswith("healthy"))
    print(
        f"abuse for {ABUSE_S:.0f} s ({IDLE_CONNECTIONS} idle connections, {SLOW_HEADS} slow "
        f"heads, {HEALTHY_CLIENTS} healthy clients): healthy streams answered in full "
        f"{counts.get('healthy ok', 0)} of {counts.get('healthy sent', 0)}; {ended}"
    )
    print(
        f"proxy RSS under abuse: {rss_before / 1024:.1f} MiB before, {max(peak) / 1024:.1f} "
        f"MiB at the peak, {rss_after / 1024:.1f} MiB after"
    )
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def soak_warmup(port: int) -> None:
    """A few streams of every kind, so the start RSS is that of a warm process."""
    for kind in ("healthy", "loop", "503", "cut"):
        headers = {"x-api-key": "k", "x-bench-scenario": kind, "x-looprescue-session": "warm"}
        await post_stream(port, "/v1/messages", REQUEST, headers)


if __name__ == "__main__":
    main()
