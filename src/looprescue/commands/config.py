"""``looprescue config show``: the effective config and where each value came from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from looprescue.commands.common import SET_HELP
from looprescue.commands.proxy import CONFIG_ENV, FLAG_KEYS, SET_ENV, env_name, resolve
from looprescue.config import ConfigError


def register(app: typer.Typer) -> None:
    app.command("config")(config_command)


def config_command(
    action: str = typer.Argument(..., metavar="show", help="What to do: show."),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        envvar=CONFIG_ENV,
        help="YAML config; default: ./looprescue.yml, else $XDG_CONFIG_HOME/looprescue/config.yml.",
    ),
    settings: list[str] | None = typer.Option(
        None, "--set", metavar="KEY=VALUE", envvar=SET_ENV, help=SET_HELP
    ),
    json_output: bool = typer.Option(False, "--json", help="One JSON object per key."),
) -> None:
    """Print the effective config, one key a line, and where each value came from.

    'looprescue config show' is the one action.
    The sources, the later winning: the defaults, the config file (--config, else
    $LOOPRESCUE_CONFIG, else ./looprescue.yml, else $XDG_CONFIG_HOME/looprescue/config.yml),
    --set (or $LOOPRESCUE_SET), and the proxy's flags as set in the environment
    (LOOPRESCUE_UPSTREAM, LOOPRESCUE_PORT, ...).

    \b
    Examples:
      looprescue config show
      LOOPRESCUE_PORT=9000 looprescue config show --set detector.poolWindow=40

    Exit code 2 on a bad config.
    """
    if action != "show":
        Console(stderr=True).print("[red]error:[/red]", escape(f"unknown action {action!r}"))
        raise typer.Exit(2)
    flags: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for flag in FLAG_KEYS:
        value = os.environ.get(env_name(flag))
        if value is not None:
            flags[flag] = value
            sources[flag] = f"env {env_name(flag)}"
    try:
        resolved = resolve(config, flags, settings, sources)
    except ConfigError as exc:
        Console(stderr=True, soft_wrap=True).print("[red]error:[/red]", escape(str(exc)))
        raise typer.Exit(2) from None
    out = Console(soft_wrap=True, highlight=False)
    for key, value in _leaves(resolved.config.model_dump(mode="json")):
        source = resolved.source_of(key)
        if json_output:
            line = {"key": key, "value": value, "source": source}
            out.out(orjson.dumps(line).decode())
        else:
            shown = "unset" if value is None else orjson.dumps(value).decode()
            out.out(f"{key} = {shown}  ({source})")


def _leaves(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        out += _leaves(value, key) if isinstance(value, dict) else [(key, value)]
    return out
