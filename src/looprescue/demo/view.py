"""How the demo shows itself: a live side-by-side view on a terminal, plain lines elsewhere
(CI logs, pipes), and the same report and figures at the end of both."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .client import MARKER, Transcript
from .run import DIRECT, RESCUED, DemoState

REASONING_STYLE = "dim italic"
MARKER_STYLE = "bold black on yellow"
EXCERPT = 90


def excerpt(text: str, limit: int = EXCERPT, tail: bool = False) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return "…" + flat[-limit + 1 :] if tail else flat[: limit - 1] + "…"


def transcript_text(transcript: Transcript, labels: bool = True) -> Text:
    """Reasoning dim, answer plain, the proxy's markers highlighted; a label where the kind
    of block changes."""
    out = Text()
    last = None
    for block in transcript.blocks:
        if labels and block.kind != last:
            if out:
                out.append("\n")
            out.append("thinking: " if block.kind == "reasoning" else "answer: ", style="bold")
        last = block.kind
        style = REASONING_STYLE if block.kind == "reasoning" else ""
        position = 0
        for match in MARKER.finditer(block.text):
            out.append(block.text[position : match.start()], style=style)
            out.append(match.group(0), style=MARKER_STYLE)
            position = match.end()
        out.append(block.text[position:], style=style)
    return out


def status(state: DemoState, side: str, short: bool = False) -> str:
    """How one side is doing; ``short`` fits a panel's footer at half of 80 columns."""
    transcript = state.direct if side == DIRECT else state.rescued
    seconds = transcript.seconds()
    if transcript.error:
        where = f"failed: {transcript.error}"
    elif transcript.done:
        reason = transcript.stop_reason or "no stop reason"
        where = reason if short else f"done ({reason})"
    else:
        where = "streaming"
    tokens = f"{state.tokens[side]} tok" if short else f"{state.tokens[side]} tokens generated"
    return f"{tokens} · {seconds:.1f} s · {where}"


def event_lines(state: DemoState) -> list[str]:
    """The proxy's audit log in words: each cut with what it pruned, each resume."""
    lines = []
    for record in state.audit:
        at = f"{record.get('elapsed_ms', 0) / 1000:4.1f} s"
        kind = record.get("kind")
        if kind == "detection" and record.get("mode") != "observe":
            lines.append(
                f"{at}  cut: {record['rule']} loop in the {record['channel']}, "
                f"{record['kept_chars']} chars kept, {record['chars_pruned']} pruned"
            )
            lines.append(f"{'':6}  pruned: “{excerpt(record.get('loop_text', ''), 60)}”")
        elif kind == "resume":
            lines.append(f"{at}  resume: continuation request {record['attempt']}")
        elif kind == "resume_failed":
            lines.append(f"{at}  resume failed: {record.get('reason')}")
    return lines


def summary_table(state: DemoState) -> Table:
    table = Table(title="summary", title_justify="left", title_style="bold", show_edge=False)
    for name in ("", "without looprescue", "with looprescue", "saved"):
        table.add_column(name, justify="right" if name else "left")
    direct, rescued = state.tokens[DIRECT], state.tokens[RESCUED]
    share = f" ({state.tokens_saved / direct:.0%})" if direct else ""
    table.add_row("tokens generated", str(direct), str(rescued), f"{state.tokens_saved}{share}")
    table.add_row(
        "seconds",
        f"{state.direct.seconds():.1f}",
        f"{state.rescued.seconds():.1f}",
        f"{state.seconds_saved:.1f}",
    )
    return table


def report(console: Console, state: DemoState) -> None:
    """The final answer and the figures, for both views (each has shown the cuts already)."""
    console.print()
    console.rule("the answer through looprescue")
    console.print(transcript_text(_answer_only(state.rescued), labels=False))
    console.print()
    console.print(summary_table(state))
    loops = ", ".join(f"{r['rule']} in the {r['channel']}" for r in state.detections)
    console.print(Text(f"chars pruned: {state.chars_pruned} ({loops or 'no loop'})"))
    console.print(Text(f"loop chars that reached the client: {state.leaked_loop_chars}"))
    console.print(
        Text(
            "  counted by the proxy from each loop's onset (leaked_loop_chars in its audit "
            f"log); a cycle keeps one copy of its unit ({state.kept_loop_chars} chars here), "
            "a phrase rotation none",
            style="dim",
        ),
    )


def _answer_only(transcript: Transcript) -> Transcript:
    answer = Transcript(transcript.side)
    answer.blocks = [block for block in transcript.blocks if block.kind == "text"]
    return answer


class LiveView:
    """Both streams side by side in one live frame, the proxy's cuts beneath them."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, auto_refresh=False, redirect_stdout=False)
        self.live.start()

    def starting(self, what: str) -> None:
        self.live.update(Text(what, style="dim"), refresh=True)

    def tick(self, state: DemoState) -> None:
        self.live.update(self._frame(state), refresh=True)

    def close(self, state: DemoState) -> None:
        self.tick(state)
        self.live.stop()
        report(self.console, state)

    def _frame(self, state: DemoState) -> RenderableType:
        events = event_lines(state)[-6:]
        body = max(6, self.console.height - len(events) - 8)
        width = max(20, self.console.width // 2 - 4)
        # a footer longer than its panel is cut by rich: below ~110 columns the short one
        short = width < 52
        grid = Table.grid(expand=True)
        grid.add_column(ratio=1)
        grid.add_column(ratio=1)
        grid.add_row(
            self._panel(
                state.direct, "without looprescue", status(state, DIRECT, short), body, width
            ),
            self._panel(
                state.rescued,
                "through looprescue" if short else "through looprescue proxy",
                status(state, RESCUED, short),
                body,
                width,
            ),
        )
        log = Text("\n".join(events) or "waiting for a loop…")
        return Group(grid, Panel(log, title="proxy audit log", title_align="left"))

    def _panel(
        self, transcript: Transcript, title: str, subtitle: str, height: int, width: int
    ) -> Panel:
        lines = transcript_text(transcript).wrap(self.console, width)
        tail = Text("\n").join(lines[-height:]) if lines else Text("")
        return Panel(tail, title=title, subtitle=subtitle, height=height + 2, title_align="left")


class PlainView:
    """Lines as things happen, then the report: for logs and pipes."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._shown = 0
        self._finished: set[str] = set()

    def starting(self, what: str) -> None:
        self.console.print(Text(what))

    def tick(self, state: DemoState) -> None:
        lines = event_lines(state)
        for line in lines[self._shown :]:
            self.console.print(Text(line))
        self._shown = len(lines)
        for side, transcript in ((DIRECT, state.direct), (RESCUED, state.rescued)):
            if transcript.done and side not in self._finished:
                self._finished.add(side)
                self.console.print(Text(f"{_name(side)}: {status(state, side)}"))

    def close(self, state: DemoState) -> None:
        self.tick(state)
        direct = state.direct
        self.console.print()
        self.console.rule("without looprescue, the client got")
        self.console.print(
            Text(
                f"{len(direct.text_of('reasoning'))} chars of reasoning ending "
                f"“{excerpt(direct.text_of('reasoning'), tail=True)}”\n"
                f"{len(direct.text_of('text'))} chars of answer ending "
                f"“{excerpt(direct.text_of('text'), tail=True)}”\n"
                f"stop reason: {direct.stop_reason}"
            )
        )
        report(self.console, state)


def _name(side: str) -> str:
    return "without looprescue" if side == DIRECT else "through looprescue"
