"""``looprescue demo``: watch the proxy save a looping run, offline, in under a minute."""

from __future__ import annotations

import typer
from rich.console import Console

from looprescue.commands.common import EXIT_OK, EXIT_UNREADABLE


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)


def demo_command(
    delay_ms: float = typer.Option(
        4.0, "--delay-ms", min=0.0, metavar="MS", help="Pause of the scripted model between deltas."
    ),
) -> None:
    """Watch the proxy rescue a looping model (offline).

    A scripted model on 127.0.0.1 loops: a rotation of short phrases in its reasoning, then
    one paragraph over and over in its answer. The real 'looprescue proxy' runs in front of
    it. One client streams through the proxy, one straight to the model, side by side:
    without looprescue the loop runs to the token limit; with it each loop is cut, what was
    pruned is shown, the task resumes and the answer ends. The summary gives the tokens and
    seconds saved, the chars pruned and the loop chars that reached the client. No network
    and no API key are needed; without a terminal the output is plain text.
    """
    from looprescue.demo.proxy import ProxyError
    from looprescue.demo.run import run_demo
    from looprescue.demo.view import LiveView, PlainView

    console = Console(highlight=False)
    view = LiveView(console) if console.is_terminal else PlainView(console)
    try:
        state = run_demo(view, delay_ms / 1000)
    except ProxyError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_UNREADABLE) from None
    failed = state.direct.error or state.rescued.error
    raise typer.Exit(EXIT_UNREADABLE if failed else EXIT_OK)
