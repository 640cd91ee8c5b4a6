"""The report as one self-contained HTML page (a Jinja2 template with autoescape: every
value from a session is text, never markup)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from looprescue import __version__
from looprescue.formatting import format_size, format_time
from looprescue.report.session import (
    MAX_EVIDENCE_EVENTS,
    SessionReport,
    loop_kind,
    signal_kind,
)

MAX_CELLS = 400  # timeline cells; longer sessions put several turns in one cell
ALL_TURN_ROWS = 30  # up to this many turns every turn gets a row; beyond, those with findings
MAX_TURN_ROWS = 200

_ENV = Environment(
    loader=PackageLoader("looprescue.report", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def plural(count: int, word: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


_ENV.filters["plural"] = plural


@dataclass(frozen=True, slots=True)
class Cell:
    """One timeline cell: a turn, or a run of turns in a long session."""

    first: int
    last: int
    classes: str
    title: str
    href: str | None


def _where(turn: int | None, step: int | None) -> str:
    if turn is None:
        return "session"
    return f"t{turn}s{step}" if step is not None else f"t{turn}"


def session_view(number: int, report: SessionReport) -> dict[str, Any]:
    """What the template needs of one session, with every id and link worked out."""
    anchor = f"s{number}"
    loops = [
        {
            "id": f"{anchor}-l{index + 1}",
            "finding": loop.finding,
            "context": loop,
            "kind": loop_kind(loop.finding),
            "where": _where(loop.finding.turn, loop.finding.step),
            "label": _loop_label(loop.finding),
        }
        for index, loop in enumerate(report.loops)
    ]
    signals = []
    for index, signal in enumerate(report.signals):
        shown_seqs = signal.evidence[:MAX_EVIDENCE_EVENTS]
        signals.append(
            {
                "id": f"{anchor}-g{index + 1}",
                "signal": signal,
                "kind": signal_kind(signal),
                "where": "session" if signal.turn is None else f"turn {signal.turn}",
                "events": [report.evidence.get(seq) for seq in shown_seqs],
                "seqs": shown_seqs,
                "more_seqs": len(signal.evidence) - len(shown_seqs),
            }
        )
    finding_turns = set(report.loop_counts) | set(report.signal_counts)
    rows = []
    for turn in report.turns:
        if len(report.turns) > ALL_TURN_ROWS and turn.turn not in finding_turns:
            continue
        if len(rows) == MAX_TURN_ROWS:
            break
        shown_loops = [item for item in loops if item["finding"].turn == turn.turn]
        shown_signals = [item for item in signals if item["signal"].turn == turn.turn]
        hidden = (
            report.loop_counts.get(turn.turn, 0)
            + report.signal_counts.get(turn.turn, 0)
            - len(shown_loops)
            - len(shown_signals)
        )
        rows.append(
            {
                "id": f"{anchor}-t{turn.turn}",
                "turn": turn,
                "loops": shown_loops,
                "signals": shown_signals,
                "hidden": hidden,
            }
        )
    linked = {row["turn"].turn for row in rows}
    return {
        "id": anchor,
        "report": report,
        "status": "error" if report.error else _status(report),
        "cells": timeline(anchor, report, linked),
        "rows": rows,
        "hidden_rows": len(report.turns) - len(rows),
        "hidden_finding_rows": len(finding_turns - linked),
        "loops": loops,
        "signals": signals,
        "loop_kinds": _kinds(report.loop_kinds, loops),
        "signal_kinds": _kinds(report.signal_kinds, signals),
        "created": format_time(report.created),
        "last_event": format_time(report.last_event),
        "size": format_size(report.size),
    }


def _kinds(counts: dict[str, int], shown: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One badge per kind of finding: how many, and a link to the first one shown."""
    first = {}
    for item in shown:
        first.setdefault(item["kind"], item["id"])
    return [
        {"kind": kind, "count": count, "href": f"#{first[kind]}" if kind in first else None}
        for kind, count in counts.items()
    ]


def _status(report: SessionReport) -> str:
    if report.loops_total:
        return "loops"
    return "signals" if report.signals_total else "clean"


def _loop_label(finding: Any) -> str:
    if finding.kind == "narration":
        return f"narration: the same {finding.chars}-char text in {len(finding.seqs)} messages"
    origin = " (failed attempt)" if finding.source == "attempt" else ""
    return (
        f"{finding.rule} in the {finding.channel}{origin}: {finding.loop_chars} chars cut, "
        f"{finding.prune_offset} of {finding.chars} kept"
    )


def timeline(anchor: str, report: SessionReport, linked: set[int]) -> list[Cell]:
    """Cells for the turns, at most MAX_CELLS (consecutive turns share a cell beyond)."""
    turns = report.turns
    per_cell = max(1, -(-len(turns) // MAX_CELLS))
    cells = []
    for start in range(0, len(turns), per_cell):
        group = turns[start : start + per_cell]
        numbers = [turn.turn for turn in group]
        loops = sum(report.loop_counts.get(n, 0) for n in numbers)
        signals = sum(report.signal_counts.get(n, 0) for n in numbers)
        classes = " ".join(name for name, count in (("loop", loops), ("signal", signals)) if count)
        span = f"turn {numbers[0]}" if len(numbers) == 1 else f"turns {numbers[0]}-{numbers[-1]}"
        tools = sum(turn.tool_calls for turn in group)
        title = f"{span}: {tools} tool calls, {loops} loops, {signals} detour signals"
        if len(group) == 1 and group[0].prompt:
            title += f"; prompt: {group[0].prompt}"
        target = next((n for n in numbers if n in linked), None)
        href = f"#{anchor}-t{target}" if target is not None else None
        cells.append(Cell(numbers[0], numbers[-1], classes or "quiet", title, href))
    return cells


def render_report(reports: Sequence[SessionReport], generated: float | None = None) -> str:
    """The whole page for ``reports``."""
    sessions = [session_view(number, report) for number, report in enumerate(reports, 1)]
    return _ENV.get_template("report.html.j2").render(
        sessions=sessions,
        generated=format_time((generated if generated is not None else time.time()) * 1000),
        version=__version__,
        loops=sum(report.loops_total for report in reports),
        signals=sum(report.signals_total for report in reports),
        errors=sum(1 for report in reports if report.error),
    )
