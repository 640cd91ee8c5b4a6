"""``looprescue proxy``: run the rescue proxy in front of a model upstream."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import resource
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
import yaml
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from looprescue.commands.common import SET_HELP, parse_settings
from looprescue.config import ConfigError, LoopRescueConfig, load_config
from looprescue.rescue import LoopDetector


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy_command)


# Each flag of the proxy: the config key it sets, and the environment variable that sets it
# when the flag is not given.
FLAG_KEYS = {
    "upstream": "proxy.upstream",
    "host": "proxy.host",
    "port": "proxy.port",
    "mode": "mode",
    "audit_log": "proxy.auditLog",
    "workers": "proxy.workers",
    "state": "proxy.state",
    "uds": "proxy.uds",
    "log_level": "proxy.logLevel",
    "log_format": "proxy.logFormat",
    "access_log_lines": "proxy.accessLog",
}
CONFIG_ENV = "LOOPRESCUE_CONFIG"
SET_ENV = "LOOPRESCUE_SET"


def env_name(flag: str) -> str:
    return "LOOPRESCUE_" + _FLAG_NAMES.get(flag, flag).upper()


# a flag whose parameter is named apart from it (``--access-log`` is not ``--audit-log``)
_FLAG_NAMES = {"access_log_lines": "access_log"}


def discover_config(given: Path | None) -> Path | None:
    """The config file: the one given (``--config`` or $LOOPRESCUE_CONFIG), else
    ``./looprescue.yml``, else ``$XDG_CONFIG_HOME/looprescue/config.yml`` (XDG's default
    ``~/.config``); None when there is none."""
    if given is not None:
        return given
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    for candidate in (Path("looprescue.yml"), Path(xdg) / "looprescue" / "config.yml"):
        if candidate.is_file():
            return candidate
    return None


@dataclass
class Resolved:
    """The effective config and where each key's value came from."""

    config: LoopRescueConfig
    file: Path | None
    sources: dict[str, str] = field(default_factory=dict)  # dotted key -> its source

    def source_of(self, key: str) -> str:
        return self.sources.get(key, "default")


def resolve(
    config: Path | None,
    flags: dict[str, Any],
    settings: list[str] | None = None,
    flag_sources: dict[str, str] | None = None,
) -> Resolved:
    """The config file (discovered when not given), then ``--set``, then the flags (keyed as
    in :data:`FLAG_KEYS`); raises ConfigError naming the bad key. ``flag_sources`` names where
    a flag's value came from (default: the flag itself)."""
    path = discover_config(config)
    overrides: dict[str, Any] = parse_settings(settings)
    sources = {key: "--set" for key in overrides}
    for flag, value in flags.items():
        if value is None:
            continue
        key = FLAG_KEYS[flag]
        overrides[key] = str(value) if isinstance(value, Path) else value
        name = _FLAG_NAMES.get(flag, flag)
        sources[key] = (flag_sources or {}).get(flag) or "--" + name.replace("_", "-")
    cfg = load_config(path, overrides)
    if path is not None:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for key in _leaf_keys(data):
            sources.setdefault(key, str(path))
    return Resolved(cfg, path, sources)


def _leaf_keys(data: Any, prefix: str = "") -> list[str]:
    if not isinstance(data, dict) or (prefix and not data):
        return [prefix] if prefix else []
    keys = []
    for name, value in data.items():
        dotted = f"{prefix}.{name}" if prefix else str(name)
        keys += _leaf_keys(value, dotted) if isinstance(value, dict) else [dotted]
    return keys


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
        "upstream": upstream,
        "host": host,
        "port": port,
        "mode": mode,
        "audit_log": audit_log,
        "workers": workers,
        "state": state,
        "uds": uds,
    }
    cfg = resolve(config, flags, settings).config
    require_upstream(cfg)
    return cfg


def require_upstream(cfg: LoopRescueConfig) -> None:
    if not cfg.proxy.upstream:
        raise ConfigError("proxy.upstream: required (pass --upstream URL or set it in the config)")


def run_proxy(
    cfg: LoopRescueConfig,
    *,
    detector_factory: Callable[[], LoopDetector] | None = None,
    wrap: Callable[[Any], Any] | None = None,
) -> None:
    """Serve the proxy until interrupted: ``proxy.workers`` processes on one port, each with
    its own upstream pool and its own view of ``proxy.state``. ``wrap`` may wrap the ASGI app
    (benchmarks add an introspection route this way)."""
    from looprescue.proxy.app import create_app
    from looprescue.proxy.server import HttpServer, Limits
    from looprescue.proxy.state import open_store

    def serve() -> None:
        if cfg.proxy.workers > 1:
            share_metrics()
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
    # the workers count into files here, and each one's /metrics reads them all
    metrics_dir = tempfile.mkdtemp(prefix="looprescue-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        _supervise(cfg.proxy.workers, serve)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def share_metrics() -> None:
    """Count into prometheus-client's multiprocess files (``PROMETHEUS_MULTIPROC_DIR``), so
    that a scrape of any worker's ``/metrics`` sums every worker's counts. Called in a worker
    before its metrics exist: the value class is chosen when a metric is made."""
    from prometheus_client import values

    values.ValueClass = values.MultiProcessValue()


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
    ctx: typer.Context,
    upstream: str | None = typer.Option(
        None,
        "--upstream",
        metavar="URL",
        envvar=env_name("upstream"),
        help="Base URL of the model API, e.g. https://api.deepseek.com/anthropic.",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        envvar=CONFIG_ENV,
        help="YAML config (the keys of DSH's loop-rescue plugin); default: ./looprescue.yml, "
        "else $XDG_CONFIG_HOME/looprescue/config.yml.",
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        metavar="PORT",
        envvar=env_name("port"),
        help="Port to listen on (default: 8787).",
    ),
    host: str | None = typer.Option(
        None,
        "--host",
        metavar="HOST",
        envvar=env_name("host"),
        help="Address to bind (default: 127.0.0.1).",
    ),
    mode: str | None = typer.Option(
        None,
        "--mode",
        metavar="rescue|cut|observe",
        envvar=env_name("mode"),
        help="Cut and resume (default), only cut, or only record detections.",
    ),
    audit_log: Path | None = typer.Option(
        None,
        "--audit-log",
        metavar="FILE",
        envvar=env_name("audit_log"),
        help="Append one JSON line per detection, cut and resume (with the removed text).",
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        metavar="N",
        envvar=env_name("workers"),
        help="Processes serving the port (default: 1).",
    ),
    state: str | None = typer.Option(
        None,
        "--state",
        metavar="memory|redis://HOST:PORT/DB",
        envvar=env_name("state"),
        help="Where conversation state lives; Redis shares it between workers and instances "
        "(default: memory).",
    ),
    uds: Path | None = typer.Option(
        None,
        "--uds",
        metavar="PATH",
        envvar=env_name("uds"),
        help="Listen on this Unix socket instead of host and port.",
    ),
    log_level: str | None = typer.Option(
        None,
        "--log-level",
        metavar="debug|info|warning|error",
        envvar=env_name("log_level"),
        help="Least level of the log lines on stderr (default: info: one line per detection, "
        "cut and resume).",
    ),
    log_format: str | None = typer.Option(
        None,
        "--log-format",
        metavar="text|json",
        envvar=env_name("log_format"),
        help="Log lines as text (default) or one JSON object per line.",
    ),
    access_log_lines: bool | None = typer.Option(
        None,
        "--access-log/--no-access-log",
        envvar="LOOPRESCUE_ACCESS_LOG",
        help="One log line per request served (default: off).",
    ),
    settings: list[str] | None = typer.Option(
        None, "--set", metavar="KEY=VALUE", envvar=SET_ENV, help=SET_HELP
    ),
) -> None:
    """Run the rescue proxy in front of a model API.

    It speaks Anthropic Messages (DSH's native provider) and OpenAI Chat Completions. A
    loop in a streamed response is cut before it reaches the client, the looping text is
    dropped, and the task resumes in the same response. Every other request passes through
    unchanged. Point the client's base URL at http://HOST:PORT (OpenAI clients: .../v1).

    Every flag can be set in the environment instead: LOOPRESCUE_ and the flag's name, e.g.
    LOOPRESCUE_UPSTREAM, LOOPRESCUE_LOG_LEVEL, LOOPRESCUE_CONFIG (LOOPRESCUE_SET holds
    KEY=VALUE pairs separated by spaces). 'looprescue config show' prints the effective
    config and where each value came from.

    \b
    Examples:
      looprescue proxy --upstream https://api.deepseek.com/anthropic
      looprescue proxy --upstream https://api.deepseek.com --mode observe --audit-log a.jsonl
      looprescue proxy --upstream URL --workers 2 --state redis://127.0.0.1:6379/0
      LOOPRESCUE_UPSTREAM=URL looprescue proxy --log-format json

    Exit code 2 on a bad config or flag, or when the address cannot be bound.
    """
    err = Console(stderr=True, soft_wrap=True)
    flags = {
        "upstream": upstream,
        "host": host,
        "port": port,
        "mode": mode,
        "audit_log": audit_log,
        "workers": workers,
        "state": state,
        "uds": uds,
        "log_level": log_level,
        "log_format": log_format,
        "access_log_lines": access_log_lines,
    }
    try:
        cfg = resolve(config, flags, settings, flag_sources(ctx, flags)).config
        require_upstream(cfg)
        from looprescue.proxy.app import check_upstream_url

        # checked without building the app: a worker builds its own, metrics included
        check_upstream_url(cfg.proxy.upstream or "")
        if cfg.proxy.workers > 1 and not hasattr(os, "fork"):
            raise ConfigError(
                "proxy.workers: more than 1 needs fork(), which this platform lacks; run one "
                "proxy per port instead"
            )
    except (ConfigError, ValueError) as exc:
        err.print("[red]error:[/red]", escape(str(exc)))
        raise typer.Exit(2) from None
    from looprescue.logsetup import configure

    configure(cfg.proxy.logLevel, cfg.proxy.logFormat)
    where = cfg.proxy.uds or f"{cfg.proxy.host}:{cfg.proxy.port}"
    shown = f"unix:{cfg.proxy.uds}" if cfg.proxy.uds else f"http://{where}"
    logging.getLogger("looprescue.proxy").info(
        "looprescue proxy on %s -> %s (mode %s, watch %s, %d worker(s), state %s)",
        shown,
        cfg.proxy.upstream,
        cfg.mode,
        cfg.watch,
        cfg.proxy.workers,
        cfg.proxy.state,
    )
    try:
        run_proxy(cfg)
    except OSError as exc:  # the port is taken, or the address is not ours
        err.print("[red]error:[/red]", escape(f"cannot listen on {where}: {exc}"))
        raise typer.Exit(2) from None


def flag_sources(ctx: typer.Context, flags: dict[str, Any]) -> dict[str, str]:
    """Which of ``flags`` came from the environment rather than the command line."""
    sources = {}
    for flag in flags:
        if ctx.get_parameter_source(flag) == ParameterSource.ENVIRONMENT:
            sources[flag] = f"env {env_name(flag)}"
    return sources
