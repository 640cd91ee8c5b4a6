"""``looprescue proxy``: run the rescue proxy in front of a model upstream."""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from looprescue.commands.common import SET_HELP, parse_settings
from looprescue.config import ConfigError, LoopRescueConfig, load_config


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy_command)


def resolve_config(
    config: Path | None,
    upstream: str | None,
    host: str | None,
    port: int | None,
    mode: str | None,
    audit_log: Path | None,
    settings: list[str] | None = None,
    workers: int | None = None,
    state: str | None = None,
    uds: Path | None = None,
) -> LoopRescueConfig:
    """YAML first, then ``--set`` flags, then the dedicated flags; raises ConfigError naming the
    bad key."""
    flags = {
        "proxy.upstream": upstream,
        "proxy.host": host,
        "proxy.port": port,
        "mode": mode,
        "proxy.auditLog": str(audit_log) if audit_log is not None else None,
        "proxy.workers": workers,
        "proxy.state": state,
        "proxy.uds": str(uds) if uds is not None else None,
    }
    overrides: dict[str, Any] = {
        **parse_settings(settings),
        **{key: value for key, value in flags.items() if value is not None},
    }
    cfg = load_config(config, overrides)
    if not cfg.proxy.upstream:
        raise ConfigError("proxy.upstream: required (pass --upstream URL or set it in the config)")
    return cfg


def run_proxy(
    cfg: LoopRescueConfig,
    *,
    detector_factory: Callable[[], Any] | None = None,
    wrap: Callable[[Any], Any] | None = None,
) -> None:
    """Serve the proxy until interrupted: ``proxy.workers`` processes on one port, each with
    its own upstream pool and its own view of ``proxy.state``. ``wrap`` may wrap the ASGI app
    (benchmarks add an introspection route this way)."""
    from looprescue.proxy.app import create_app
    from looprescue.proxy.server import HttpServer, Limits
    from looprescue.proxy.state import open_store

    def serve() -> None:
        store = open_store(cfg.proxy.state, cfg.proxy.maxConversations)
        app = create_app(
            cfg, cfg.proxy.upstream or "", store=store, detector_factory=detector_factory
        )
        server = HttpServer(wrap(app) if wrap else app, Limits.from_config(cfg.proxy))
        settle_garbage_collector()
        server.run([sock])

    raise_open_file_limit()
    sock = listening_socket(cfg)
    if cfg.proxy.workers == 1:
        serve()
        return
    _supervise(cfg.proxy.workers, serve)


def listening_socket(cfg: LoopRescueConfig) -> socket.socket:
    """The socket every worker accepts on: ``proxy.uds`` when set, else host and port."""
    if cfg.proxy.uds:
        path = Path(cfg.proxy.uds)
        if path.is_socket():
            # a socket file left by an earlier run that nothing listens on any more
            with socket.socket(socket.AF_UNIX) as probe:
                try:
                    probe.connect(str(path))
                except OSError:
                    path.unlink()
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
    else:
        sock = socket.socket(socket.AF_INET6 if ":" in cfg.proxy.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((cfg.proxy.host, cfg.proxy.port))
    sock.listen(4096)
    sock.set_inheritable(True)
    return sock


def raise_open_file_limit() -> None:
    """Take the whole open-file limit the system allows: each client connection needs a
    descriptor, and one more while its stream is upstream."""
    with contextlib.suppress(OSError, ValueError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def settle_garbage_collector() -> None:
    """Keep the heap built while starting (modules, config, the app) out of the cycle
    collector's sight for good (``gc.freeze``): every older collection would walk it again.
    The thresholds stay CPython's: with young collections spaced 20000 allocations apart, the
    soak's RSS grew by 29 MiB in a minute (cyclic garbage of failed and cut streams reached the
    oldest generation and waited there), against under 1 MiB with the defaults. (Only the
    proxy's own process: the SDK wrapper and the LiteLLM callback leave their host's collector
    alone.)"""
    gc.collect()
    gc.freeze()


def _supervise(workers: int, serve: Callable[[], None]) -> None:
    """Fork ``workers`` processes that share the listening socket; restart one that dies,
    stop them all on SIGINT/SIGTERM."""
    stopping = False

    def start() -> int:
        pid = os.fork()
        if pid == 0:  # the worker
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            code = 0
            try:
                serve()
            except BaseException:
                code = 1
            os._exit(code)
        return pid

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    children = {start() for _ in range(workers)}
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while children:
        try:
            pid, _status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        children.discard(pid)
        if not stopping:
            children.add(start())


def proxy_command(
    upstream: str | None = typer.Option(
        None,
        "--upstream",
        metavar="URL",
        help="Base URL of the model API, e.g. https://api.deepseek.com/anthropic.",
    ),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE", help="YAML config (the keys of DSH's loop-rescue plugin)."
    ),
    port: int | None = typer.Option(
        None, "--port", metavar="PORT", help="Port to listen on (default: 8787)."
    ),
    host: str | None = typer.Option(
        None, "--host", metavar="HOST", help="Address to bind (default: 127.0.0.1)."
    ),
    mode: str | None = typer.Option(
        None,
        "--mode",
        metavar="rescue|cut|observe",
        help="Cut and resume (default), only cut, or only record detections.",
    ),
    audit_log: Path | None = typer.Option(
        None,
        "--audit-log",
        metavar="FILE",
        help="Append one JSON line per detection, cut and resume (with the removed text).",
    ),
    workers: int | None = typer.Option(
        None, "--workers", metavar="N", help="Processes serving the port (default: 1)."
    ),
    state: str | None = typer.Option(
        None,
        "--state",
        metavar="memory|redis://HOST:PORT/DB",
        help="Where conversation state lives; Redis shares it between workers and instances "
        "(default: memory).",
    ),
    uds: Path | None = typer.Option(
        None,
        "--uds",
        metavar="PATH",
        help="Listen on this Unix socket instead of host and port.",
    ),
    settings: list[str] | None = typer.Option(None, "--set", metavar="KEY=VALUE", help=SET_HELP),
) -> None:
    """Run the rescue proxy in front of a model API.

    It speaks Anthropic Messages (DSH's native provider) and OpenAI Chat Completions. A
    loop in a streamed response is cut before it reaches the client, the looping text is
    dropped, and the task resumes in the same response. Every other request passes through
    unchanged. Point the client's base URL at http://HOST:PORT (OpenAI clients: .../v1).

    \b
    Examples:
      looprescue proxy --upstream https://api.deepseek.com/anthropic
      looprescue proxy --upstream https://api.deepseek.com --mode observe --audit-log a.jsonl
      looprescue proxy --upstream URL --workers 2 --state redis://127.0.0.1:6379/0

    Exit code 2 on a bad config or flag, or when the address cannot be bound.
    """
    err = Console(stderr=True)
    try:
        cfg = resolve_config(
            config, upstream, host, port, mode, audit_log, settings, workers, state, uds
        )
        from looprescue.proxy.app import Proxy

        Proxy(cfg, cfg.proxy.upstream or "")  # validates the upstream URL
        if cfg.proxy.workers > 1 and not hasattr(os, "fork"):
            raise ConfigError(
                "proxy.workers: more than 1 needs fork(), which this platform lacks; run one "
                "proxy per port instead"
            )
    except (ConfigError, ValueError) as exc:
        err.print("[red]error:[/red]", escape(str(exc)))
        raise typer.Exit(2) from None
    where = cfg.proxy.uds or f"{cfg.proxy.host}:{cfg.proxy.port}"
    shown = f"unix:{cfg.proxy.uds}" if cfg.proxy.uds else f"http://{where}"
    err.print(
        f"looprescue proxy on {shown} -> {cfg.proxy.upstream} "
        f"(mode {cfg.mode}, watch {cfg.watch}, {cfg.proxy.workers} worker(s), "
        f"state {cfg.proxy.state})"
    )
    try:
        run_proxy(cfg)
    except OSError as exc:  # the port is taken, or the address is not ours
        err.print("[red]error:[/red]", escape(f"cannot listen on {where}: {exc}"))
        raise typer.Exit(2) from None
