"""``looprescue proxy``: run the rescue proxy in front of a model upstream."""

from __future__ import annotations

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
) -> LoopRescueConfig:
    """YAML first, then ``--set`` flags, then the dedicated flags; raises ConfigError naming the
    bad key."""
    flags = {
        "proxy.upstream": upstream,
        "proxy.host": host,
        "proxy.port": port,
        "mode": mode,
        "proxy.auditLog": str(audit_log) if audit_log is not None else None,
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
    state: str | None = None,
    detector_factory: Callable[[], Any] | None = None,
) -> None:
    """Serve the proxy until interrupted (raises ValueError on a bad upstream URL or state)."""
    import uvicorn

    from looprescue.proxy.app import create_app
    from looprescue.proxy.state import open_store

    store = open_store(state, cfg.proxy.maxConversations)
    app = create_app(cfg, cfg.proxy.upstream or "", store=store, detector_factory=detector_factory)
    uvicorn.run(
        app,
        host=cfg.proxy.host,
        port=cfg.proxy.port,
        # uvloop (a dependency) when importable: it cuts the per-chunk cost.
        loop="auto",
        http="httptools",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )


def proxy_command(
    upstream: str | None = typer.Option(
        None, "--upstream", help="Model API base URL, e.g. https://api.deepseek.com/anthropic."
    ),
    config: Path | None = typer.Option(None, "--config", help="YAML config (same keys as DSH)."),
    port: int | None = typer.Option(None, "--port", help="Port to listen on (default 8787)."),
    host: str | None = typer.Option(None, "--host", help="Address to bind (default 127.0.0.1)."),
    mode: str | None = typer.Option(None, "--mode", help="rescue | cut | observe."),
    audit_log: Path | None = typer.Option(
        None, "--audit-log", help="Append a JSONL record per detection, cut and resume."
    ),
    settings: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
) -> None:
    """Proxy Anthropic Messages and OpenAI Chat Completions, cutting and resuming loops.

    Point a client's base URL at http://HOST:PORT; every other request passes through.
    Exit code 2 on a bad config or flag.
    """
    err = Console(stderr=True)
    try:
        cfg = resolve_config(config, upstream, host, port, mode, audit_log, settings)
        from looprescue.proxy.app import Proxy

        Proxy(cfg, cfg.proxy.upstream or "")  # validates the upstream URL
    except (ConfigError, ValueError) as exc:
        err.print("[red]error:[/red]", escape(str(exc)))
        raise typer.Exit(2) from None
    err.print(
        f"looprescue proxy on http://{cfg.proxy.host}:{cfg.proxy.port} -> {cfg.proxy.upstream} "
        f"(mode {cfg.mode}, watch {cfg.watch})"
    )
    run_proxy(cfg)
