"""Helpers shared by the commands: config overrides from flags, session-error reports."""

from __future__ import annotations

from typing import Any

import orjson
import typer
import yaml

from looprescue.config import ConfigError
from looprescue.dsh import SessionFormatError

SET_HELP = "Override a config key, e.g. --set detector.poolWindow=40 (repeatable)."


def parse_settings(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` flags as dotted-key overrides; values are read as YAML scalars."""
    overrides: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. detector.poolWindow=40")
        try:
            overrides[key] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot read value {raw!r}") from None
    return overrides


def report_session_error(exc: SessionFormatError, json_output: bool) -> None:
    """On stderr for people; with --json also as a record on stdout."""
    typer.echo(f"error: {exc}", err=True)
    if json_output:
        typer.echo(orjson.dumps(exc.to_dict()).decode())
