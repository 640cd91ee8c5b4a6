"""The report as one self-contained HTML page (a Jinja2 template with autoescape: every
value from a session is text, never markup)."""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from looprescue import __version__
from looprescue.config import ModelPrice
from looprescue.dsh.discovery import decode_project_key
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
# the page's one script, allowed by its hash in the page's Content-Security-Policy
SCRIPT = resources.files("looprescue.report").joinpath("templates/report.js").read_text("utf-8")


@dataclass(frozen=True, slots=True)
class Cell:
    """One timeline cell: a turn, or a run of turns in a long session."""

    first: int
    last: int
    classes: str
    title: str
    target: int | None  # the turn whose row it links to


def _where(turn: int | None, step: int | None) -> str:
    if turn is None:
        return "session"
    return f"t{turn}s{step}" if step is not None else f"t{turn}"


def session_view(number: int, report: SessionReport, prices: Mapping[str, ModelPrice]) -> dict:
    """What the page needs of one session, as JSON the page's script renders."""
    anchor = f"s{number}"
    loops = [
        {
            "id": f"{anchor}-l{index + 1}",
            "where": _where(loop.finding.turn, loop.finding.step),
            "seq": loop.finding.seq,
            "label": _loop_label(loop.finding),
            "kind": loop_kind(loop.finding),
            "turn": loop.finding.turn,
            "lastTurn": loop.finding.last_turn,
            "narration": loop.finding.kind == "narration",
            "seqs": list(loop.finding.seqs),
            "excerpt": loop.finding.excerpt,
            "found": loop.found,
            "omittedBefore": loop.omitted_before,
            "before": loop.before,
            "copy": list(loop.kept_copy),
            "pruned": loop.pruned,
            "prunedMore": loop.pruned_more,
            "loopChars": loop.finding.loop_chars,
        }
        for index, loop in enumerate(report.loops)
    ]
    signals = []
    for index, signal in enumerate(report.signals):
        shown_seqs = signal.evidence[:MAX_EVIDENCE_EVENTS]
        events = []
        for seq in shown_seqs:
            event = report.evidence.get(seq)
            if event is None:
                events.append([seq, None, None, None])
            else:
                where = (f"t{event.turn}" if event.turn is not None else "") + (
                    f"s{event.step}" if event.step is not None else ""
                )
                events.append([seq, event.type, where, event.text])
        signals.append(
            {
                "id": f"{anchor}-g{index + 1}",
                "kind": signal_kind(signal),
                "turn": signal.turn,
                "where": "session" if signal.turn is None else f"turn {signal.turn}",
                "metric": signal.metric,
                "explanation": signal.explanation,
                "seqs": list(shown_seqs),
                "moreSeqs": len(signal.evidence) - len(shown_seqs),
                "evidenceCount": len(signal.evidence),
                "events": events,
            }
        )
    finding_turns = set(report.loop_counts) | set(report.signal_counts)
    rows = []
    for turn in report.turns:
        if len(report.turns) > ALL_TURN_ROWS and turn.turn not in finding_turns:
            continue
        if len(rows) == MAX_TURN_ROWS:
            break
        shown_loops = [[item["id"], item["kind"]] for item in loops if item["turn"] == turn.turn]
        shown_signals = [
            [item["id"], item["kind"]] for item in signals if item["turn"] == turn.turn
        ]
        hidden = (
            report.loop_counts.get(turn.turn, 0)
            + report.signal_counts.get(turn.turn, 0)
            - len(shown_loops)
            - len(shown_signals)
        )
        rows.append(
            {
                "turn": turn.turn,
                "prompt": turn.prompt,
                "end": turn.end_reason if turn.end_reason not in (None, "completed") else None,
                "steps": turn.steps,
                "tools": turn.tool_calls,
                "failed": turn.tool_failures,
                "retries": turn.retries,
                "loops": shown_loops,
                "signals": shown_signals,
                "hidden": hidden,
            }
        )
    linked = {row["turn"] for row in rows}
    total, loop_dollars = report.cost(prices)
    status = "error" if report.error else _status(report)
    loop_tokens = report.loop_tokens_total
    return {
        "anchor": anchor,
        "id": report.session_id,
        "title": report.title,
        "project": project_of(report),
        "cwd": report.cwd,
        "path": report.path,
        "status": status,
        "created": format_time(report.created),
        "last": format_time(report.last_event),
        "lastMs": report.last_event or report.created or 0,
        "turns": len(report.turns),
        "events": report.events,
        "size": format_size(report.size),
        "loops": report.loops_total,
        "signals": report.signals_total,
        "kinds": _kinds(report.loop_kinds, loops, "loop")
        + _kinds(report.signal_kinds, signals, "signal"),
        "tokensIn": report.input_tokens,
        "tokensOut": report.output_tokens,
        "tokensEst": report.usage_estimated,
        "loopTokens": loop_tokens,
        "loopTokensEst": report.loop_tokens_estimated,
        "dollars": None if total is None else round(total, 6),
        "loopDollars": None
        if loop_dollars is None or not report.loops_total
        else round(loop_dollars, 6),
        # what the list sorts by: dollars where every model is priced, else tokens
        "loopCost": loop_dollars * 1e6 if loop_dollars is not None else loop_tokens,
        "clean": (
            {"messages": report.clean_messages, "chars": report.clean_chars}
            if report.clean_messages
            else None
        ),
        "next": next_commands(report),
        "error": report.error,
        "notes": report.notes,
        "cells": [
            [c.first, c.last, c.classes, c.title, c.target] for c in timeline(report, linked)
        ],
        "rows": rows,
        "hiddenRows": len(report.turns) - len(rows),
        "hiddenFindingRows": len(finding_turns - linked),
        "loopCards": loops,
        "moreLoops": report.loops_total - len(loops),
        "signalCards": signals,
        "moreSignals": report.signals_total - len(signals),
    }


def project_of(report: SessionReport) -> str:
    """The project a session belongs to: its DSH project dir, else its working dir's name."""
    project_dir = Path(report.path).parent.parent.name
    if project_dir.startswith("--") and project_dir.endswith("--") and len(project_dir) > 4:
        return decode_project_key(project_dir)
    return Path(report.cwd).name if report.cwd else "-"


def next_commands(report: SessionReport) -> list[list[str]]:
    """(why, command) to run next for the session: clean its loops, look at its detours."""
    ident = report.session_id or report.path
    if report.error:
        return [
            [
                "a crash can leave a log unreadable; repair keeps everything before the damage:",
                f"looprescue repair {ident} --dry-run",
            ]
        ]
    out = []
    if report.clean_messages:
        out.append(["see exactly what clean would change:", f"looprescue clean {ident} --dry-run"])
        out.append(
            ["then cut the loops (undo: looprescue clean --undo):", f"looprescue clean {ident}"]
        )
    elif report.loops_total:
        out.append(
            [
                "its loops are in failed attempts or span messages, which clean leaves; list them:",
                f"looprescue scan {ident}",
            ]
        )
    if report.signals_total:
        out.append(["every detour signal with its evidence:", f"looprescue doctor {ident}"])
    return out


def _kinds(counts: dict[str, int], shown: list[dict[str, Any]], type_: str) -> list[list]:
    """One badge per kind of finding: [kind, how many, loop or signal, first card's id]."""
    first: dict[str, str] = {}
    for item in shown:
        first.setdefault(item["kind"], item["id"])
    return [[kind, count, type_, first.get(kind)] for kind, count in counts.items()]


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


def timeline(report: SessionReport, linked: set[int]) -> list[Cell]:
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
        cells.append(Cell(numbers[0], numbers[-1], classes or "quiet", title, target))
    return cells


def page_data(
    reports: Sequence[SessionReport], prices: Mapping[str, ModelPrice], generated: float
) -> dict[str, Any]:
    """Everything the page shows, as the JSON it carries: the sessions sorted by what their
    loops cost (dollars where priced, else tokens), then by detours, then newest first."""
    sessions = [session_view(n, report, prices) for n, report in enumerate(reports, 1)]
    order = {"loops": 0, "signals": 1, "error": 2, "clean": 3}
    sessions.sort(
        key=lambda s: (order[s["status"]], -s["loopCost"], -s["signals"], -(s["lastMs"] or 0))
    )
    priced = [s["loopDollars"] for s in sessions if s["loopDollars"] is not None]
    return {
        "generated": format_time(generated * 1000),
        "version": __version__,
        "projects": sorted({s["project"] for s in sessions}),
        "totals": {
            "sessions": len(sessions),
            "loops": sum(r.loops_total for r in reports),
            "loopSessions": sum(1 for r in reports if r.loops_total),
            "signals": sum(r.signals_total for r in reports),
            "signalSessions": sum(1 for r in reports if r.signals_total),
            "errors": sum(1 for r in reports if r.error),
            "loopTokens": sum(r.loop_tokens_total for r in reports),
            "loopTokensEst": any(r.loop_tokens_estimated for r in reports),
            "tokensIn": sum(r.input_tokens for r in reports),
            "tokensOut": sum(r.output_tokens for r in reports),
            "loopDollars": round(sum(priced), 6) if priced else None,
            "clean": sum(1 for r in reports if r.clean_messages),
        },
        "sessions": sessions,
    }


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: no "<" can close it or open a comment."""
    text = orjson.dumps(data).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_report(
    reports: Sequence[SessionReport],
    generated: float | None = None,
    prices: Mapping[str, ModelPrice] | None = None,
) -> str:
    """The whole page for ``reports``."""
    data = page_data(reports, prices or {}, generated if generated is not None else time.time())
    script = SCRIPT
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return _ENV.get_template("report.html.j2").render(
        data=data,
        totals=data["totals"],
        data_json=Markup(_script_json(data)),
        script=Markup(script),
        script_hash=f"sha256-{digest}",
    )
