"""Processes the proxy benchmarks run: a lean paced SSE upstream, the minimal asyncio byte
relay (the baseline), ``looprescue proxy`` itself, and a lean streaming client.

The upstream and the client are raw asyncio protocols on purpose: they share the machine with
the process being measured, so the less CPU they take the less they disturb it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` and its descendants (from /proc)."""
    total = 0.0
    for one in [pid, *_descendants(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants, KiB."""
    total = 0
    for one in [pid, *_descendants(pid)]:
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for child in map(int, children):
        out += [child, *_descendants(child)]
    return out


def wait_listening(port: int, process: subprocess.Popen, what: str, log: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited early:\n{Path(log).read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start listening within 60 s") from None
            time.sleep(0.05)


class Child:
    """A child process listening on ``port``; stopped with SIGTERM."""

    def __init__(self, command: list[str], port: int, what: str, env: dict | None = None) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        # stderr to a file, not a pipe: a pipe nobody reads blocks a chatty child
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            text=True,
            env={**os.environ, **(env or {})},
        )
        wait_listening(port, self.process, what, self.log.name)

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss(self) -> int:
        return rss_kib(self.pid)

    def errors(self) -> str:
        """What the child wrote to stderr so far."""
        return Path(self.log.name).read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


# --------------------------------------------------------------------------- paced upstream


def anthropic_frames(
    reasoning: str, text: str, pace_ms: float, chunk_chars: int = 6
) -> list[tuple[str, float]]:
    """[frame, delay before it in ms] of one streamed Messages response: a thinking block with
    ``reasoning`` (when not empty), then a text block with ``text``, one delta every
    ``pace_ms``."""

    def frame(payload: dict) -> str:
        return f"event: {payload['type']}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n"

    message = {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "deepseek-flash",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 0},
    }
    frames = [(frame({"type": "message_start", "message": message}), 0.0)]
    frames.append((frame({"type": "ping"}), 0.0))
    blocks = [("thinking", "thinking_delta", reasoning), ("text", "text_delta", text)]
    index = 0
    for kind, delta_kind, content in blocks:
        if not content:
            continue
        start = (
            {"type": kind, kind: ""}
            if kind == "text"
            else {"type": kind, kind: "", "signature": ""}
        )
        frames.append(
            (frame({"type": "content_block_start", "index": index, "content_block": start}), 0.0)
        )
        for position in range(0, len(content), chunk_chars):
            delta = {"type": delta_kind, kind: content[position : position + chunk_chars]}
            payload = {"type": "content_block_delta", "index": index, "delta": delta}
            frames.append((frame(payload), pace_ms if len(frames) > 3 else 0.0))
        frames.append((frame({"type": "content_block_stop", "index": index}), 0.0))
        index += 1
    end = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 150},
    }
    frames.append((frame(end), 0.0))
    frames.append((frame({"type": "message_stop"}), 0.0))
    return frames


def upstream_process(scenarios_json: str) -> Child:
    """The paced upstream (see :func:`serve_paced_upstream`) in its own process."""
    port = free_port()
    code = "from benchmarks.proxy_fixtures import serve_paced_upstream as s; s()"
    script = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)  # noqa: SIM115
    with script:
        script.write(scenarios_json)
    scenarios_json = script.name
    return Child(
        python(code),
        port,
        "paced upstream",
        {"BENCH_PORT": str(port), "BENCH_SCENARIOS": scenarios_json},
    )


def serve_paced_upstream() -> None:
    """An HTTP/1.1 keep-alive server writing pre-rendered SSE frames, one chunk each.

    ``BENCH_SCENARIOS`` (a JSON file) maps a scenario name to a list of ``[frame, delay_ms]``; the
    request names its scenario in the ``x-bench-scenario`` header, and a continuation (its body
    holds the proxy's ``[looprescue]`` correction) gets scenario ``NAME:resume`` when there is
    one. A frame ``null`` cuts the connection; ``"status:503"`` as the only frame answers with
    that status.
    """
    import uvloop

    scenarios = {
        name: [(frame.encode() if frame is not None else None, delay) for frame, delay in frames]
        for name, frames in json.loads(Path(os.environ["BENCH_SCENARIOS"]).read_text()).items()
    }
    port = int(os.environ["BENCH_PORT"])

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                scenario = "default"
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"x-bench-scenario":
                        scenario = value.strip().decode()
                body = await reader.readexactly(length)
                if b"[looprescue]" in body and f"{scenario}:resume" in scenarios:
                    scenario = f"{scenario}:resume"
                frames = scenarios[scenario]
                if frames and frames[0][0] is not None and frames[0][0].startswith(b"status:"):
                    status = frames[0][0].split(b":")[1]
                    body = b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'
                    writer.write(
                        b"HTTP/1.1 " + status + b" Busy\r\ncontent-type: application/json\r\n"
                        b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
                    )
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for frame, delay in frames:
                    if delay > 0:
                        await asyncio.sleep(delay / 1000)
                    if frame is None:
                        writer.transport.abort()
                        return
                    writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    uvloop.run(main())


# --------------------------------------------------------------------------- the baseline


def relay_process(upstream_port: int) -> Child:
    port = free_port()
    code = "from benchmarks.proxy_fixtures import serve_byte_relay as s; s()"
    env = {"BENCH_PORT": str(port), "BENCH_UPSTREAM_PORT": str(upstream_port)}
    return Child(python(code), port, "byte relay", env)


def serve_byte_relay() -> None:
    """The minimal asyncio byte relay: every client connection gets an upstream connection and
    bytes are copied both ways, unparsed. The floor any HTTP proxy is measured against."""
    import uvloop

    port = int(os.environ["BENCH_PORT"])
    upstream_port = int(os.environ["BENCH_UPSTREAM_PORT"])

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
        async with server:
            await server.serve_forever()

    uvloop.run(main())


# --------------------------------------------------------------------------- the proxy


def proxy_process(
    upstream_url: str, mode: str, *extra: str, noop_detector: bool = False, src: str | None = None
) -> Child:
    """``looprescue proxy`` (or, with ``noop_detector``, the same server with a detector that
    never fires and holds nothing, to split the proxy's own cost from the detector's); ``src``:
    another checkout's ``src/`` to run instead of this one."""
    port = free_port()
    args = ["proxy", "--upstream", upstream_url, "--port", str(port), "--mode", mode, *extra]
    if noop_detector:
        code = "from benchmarks.proxy_fixtures import serve_noop_proxy as s; s()"
    else:
        code = "from looprescue.cli import main; main()"
    # BENCH_PROXY_SRC: measure the proxy of another checkout's src/ (before/after figures)
    other = src or os.environ.get("BENCH_PROXY_SRC")
    env = {"PYTHONPATH": other} if other else None
    return Child(python(code, *args), port, f"proxy {mode}", env)


class NoopDetector:
    """Never fires, never holds back."""

    def feed(self, channel: str, delta: str) -> None:
        return None

    def flush(self, channel: str) -> None:
        return None

    def safe_offset(self, channel: str) -> int:
        return 1 << 62


def stats_route(app: Any) -> Any:
    """Wrap the proxy's ASGI app with ``GET /__bench/stats``: live tasks, busy upstream
    connections and the rescue totals of this process (benchmarks only)."""

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/__bench/stats":
            await app(scope, receive, send)
            return
        proxy = app.state.proxy
        totals = proxy.totals
        body = json.dumps(
            {
                "tasks": len(asyncio.all_tasks()) - 1,  # this request's own task excluded
                "busy_upstream": proxy.transport.busy_connections(),
                "responses": totals.responses,
                "rescues": totals.rescues,
                "detections": totals.detections,
                "leaked_loop_chars": totals.leaked_loop_chars,
                "upstream_cancelled": totals.upstream_cancelled,
            }
        ).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return wrapped


def soak_proxy_process(upstream_url: str, *settings: str) -> Child:
    """``looprescue proxy`` (rescue mode, one worker) with the stats route."""
    port = free_port()
    code = "from benchmarks.proxy_fixtures import serve_stats_proxy as s; s()"
    args = ["proxy", "--upstream", upstream_url, "--port", str(port), *settings]
    return Child(python(code, *args), port, "proxy (soak)")


def serve_stats_proxy() -> None:
    from looprescue.commands.proxy import resolve_config, run_proxy

    args = sys.argv[2:]
    named = dict(zip(args[0:4:2], args[1:4:2], strict=True))
    settings = [
        value for flag, value in zip(args[4::2], args[5::2], strict=True) if flag == "--set"
    ]
    cfg = resolve_config(
        None, named["--upstream"], None, int(named["--port"]), None, None, settings
    )
    run_proxy(cfg, wrap=stats_route)


def serve_noop_proxy() -> None:
    """``proxy --upstream URL --port N --mode M`` with :class:`NoopDetector` (same server)."""
    from looprescue.commands.proxy import resolve_config, run_proxy

    args = dict(zip(sys.argv[2::2], sys.argv[3::2], strict=False))
    cfg = resolve_config(None, args["--upstream"], None, int(args["--port"]), args["--mode"], None)
    run_proxy(cfg, detector_factory=NoopDetector)  # one worker, memory state: the defaults


# --------------------------------------------------------------------------- client


@dataclass
class StreamOutcome:
    status: int
    body: bytes
    error: str | None = None


async def post_stream(
    port: int,
    path: str,
    body: bytes,
    headers: dict[str, str],
    abandon_after: int | None = None,
) -> StreamOutcome:
    """POST over a fresh connection and read the whole (chunked or sized) response; with
    ``abandon_after``, hang up after that many body bytes."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as err:
        return StreamOutcome(0, b"", f"connect: {err}")
    try:
        lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines += ["content-type: application/json", f"content-length: {len(body)}", "", ""]
        writer.write("\r\n".join(lines).encode() + body)
        status_line = await reader.readline()
        parts = status_line.split(b" ", 2)
        if len(parts) < 2:
            return StreamOutcome(0, b"", f"no status line: {status_line!r}")
        status = int(parts[1])
        response_headers: dict[bytes, bytes] = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            response_headers[name.strip().lower()] = value.strip()
        pieces: list[bytes] = []
        received = 0
        if response_headers.get(b"transfer-encoding", b"").lower() != b"chunked":
            while chunk := await reader.read(65536):
                pieces.append(chunk)
                received += len(chunk)
                if abandon_after is not None and received >= abandon_after:
                    return StreamOutcome(status, b"".join(pieces), "abandoned")
            return StreamOutcome(status, b"".join(pieces))
        while True:
            size_line = await reader.readline()
            if not size_line:
                return StreamOutcome(status, b"".join(pieces), "connection closed mid-body")
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                await reader.readline()
                return StreamOutcome(status, b"".join(pieces))
            chunk = await reader.readexactly(size + 2)
            pieces.append(chunk[:-2])
            received += size
            if abandon_after is not None and received >= abandon_after:
                return StreamOutcome(status, b"".join(pieces), "abandoned")
    except (ConnectionError, asyncio.IncompleteReadError, ValueError) as err:
        return StreamOutcome(0, b"", f"{type(err).__name__}: {err}")
    finally:
        writer.close()
