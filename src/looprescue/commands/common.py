"""Helpers shared by the session commands (scan, doctor, ...)."""

from __future__ import annotations

import orjson
import typer

from looprescue.dsh import SessionFormatError


def report_session_error(exc: SessionFormatError, json_output: bool) -> None:
    """On stderr for people; with --json also as a record on stdout."""
    typer.echo(f"error: {exc}", err=True)
    if json_output:
        typer.echo(orjson.dumps(exc.to_dict()).decode())
