"""What the report shows of one session, folded from its records. Pure: records in, values out.

Two passes over a log, each bounded in memory whatever the log's size:

1. :class:`SessionFold` feeds every record to the session scanner (loops) and the doctor
   (detour signals), and tallies each turn (steps, tool calls, failures, retries, the prompt);
2. :class:`DetailFold` then collects, for the seqs the findings name, what the report quotes:
   the text around each loop and a one-line summary of each evidence event.

Everything quoted is an excerpt of bounded length, so a huge session gives a page of bounded
size: the report shows where to look, ``looprescue scan`` / ``doctor`` and the log hold the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from looprescue.config import LoopRescueConfig, ModelPrice, price_of
from looprescue.doctor import DetourSignal, SessionAnalysis
from looprescue.doctor import events as ev
from looprescue.dsh.findings import Finding, SessionScanner, message_model
from looprescue.dsh.records import Record
from looprescue.dsh.views import AssistantMessage, Attempt, SessionTitle, text_deltas
from looprescue.tokens import estimate_tokens

# Bounds of what one session contributes to the page.
MAX_LOOPS = 20  # loops shown with their text; the rest are counted
MAX_SIGNALS = 40
MAX_EVIDENCE_EVENTS = 32  # per signal, summarised (the seqs are all listed)
CONTEXT_CHARS = 500  # text before a loop's onset
COPY_CHARS = 700  # the one copy of a periodic loop that is kept
PRUNED_CHARS = 700  # the start of what a cut removes
EVENT_CHARS = 240  # one evidence event's summary
PROMPT_CHARS = 140


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` chars with an ellipsis, on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def middle_clip(text: str, limit: int) -> tuple[str, int, str]:
    """(head, chars left out, tail) of ``text`` within ``limit`` chars."""
    if len(text) <= limit:
        return text, 0, ""
    half = limit // 2
    return text[:half], len(text) - 2 * half, text[-half:]


@dataclass
class TurnTally:
    """One turn at a glance."""

    turn: int
    prompt: str = ""
    steps: int = 0
    messages: int = 0
    tool_calls: int = 0
    tool_failures: int = 0
    retries: int = 0
    started: float | None = None
    ended: float | None = None
    end_reason: str | None = None


@dataclass
class LoopContext:
    """A loop in its block: what comes before it, the copy kept, the start of what is cut."""

    finding: Finding
    omitted_before: int = 0
    before: str = ""
    kept_copy: tuple[str, int, str] = ("", 0, "")
    pruned: str = ""
    pruned_more: int = 0
    found: bool = False  # False: the block could not be found again in the second pass


@dataclass(frozen=True, slots=True)
class EventSummary:
    seq: int
    type: str
    turn: int | None
    step: int | None
    text: str


@dataclass
class SessionReport:
    """Everything the page shows of one session."""

    path: str
    session_id: str = ""
    title: str | None = None
    cwd: str | None = None
    created: float | None = None
    last_event: float | None = None
    events: int = 0
    size: int = 0
    turns: list[TurnTally] = field(default_factory=list)
    loops: list[LoopContext] = field(default_factory=list)
    loops_total: int = 0
    signals: list[DetourSignal] = field(default_factory=list)
    signals_total: int = 0
    evidence: dict[int, EventSummary] = field(default_factory=dict)
    # every finding, shown in detail or not: per turn, and by kind over the session
    loop_counts: dict[int, int] = field(default_factory=dict)
    signal_counts: dict[int, int] = field(default_factory=dict)
    loop_kinds: dict[str, int] = field(default_factory=dict)
    signal_kinds: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    # what the session's model calls cost, per model: [input tokens, output tokens]; a message
    # without usage counts its output as estimated from its chars (and no input)
    usage: dict[str, list[int]] = field(default_factory=dict)
    usage_estimated: bool = False
    # output tokens of the loops, per model (a narration run: the session's main model)
    loop_tokens: dict[str, int] = field(default_factory=dict)
    loop_tokens_estimated: bool = False
    # what `clean` would cut: the assistant messages with a loop and the chars of the loops
    clean_messages: int = 0
    clean_chars: int = 0

    @property
    def input_tokens(self) -> int:
        return sum(pair[0] for pair in self.usage.values())

    @property
    def output_tokens(self) -> int:
        return sum(pair[1] for pair in self.usage.values())

    @property
    def loop_tokens_total(self) -> int:
        return sum(self.loop_tokens.values())

    @property
    def main_model(self) -> str:
        return max(self.usage, key=lambda model: self.usage[model][1], default="")

    def cost(self, prices: Mapping[str, ModelPrice]) -> tuple[float | None, float | None]:
        """(dollars of the whole session, dollars of its loops), None where a model it used
        has no price."""
        total = 0.0
        for model, (tokens_in, tokens_out) in self.usage.items():
            price = price_of(dict(prices), model)
            if price is None:
                total = None  # type: ignore[assignment]
                break
            total += (tokens_in * price.input + tokens_out * price.output) / 1e6
        loops = 0.0
        for model, tokens in self.loop_tokens.items():
            price = price_of(dict(prices), model or self.main_model)
            if price is None:
                loops = None  # type: ignore[assignment]
                break
            loops += tokens * price.output / 1e6
        return total, loops

    def to_record(self, prices: Mapping[str, ModelPrice] | None = None) -> dict[str, Any]:
        """What ``report --json`` prints for the session."""
        total, loops = self.cost(prices or {})
        return {
            "kind": "session",
            "session": self.session_id,
            "path": self.path,
            "title": self.title,
            "cwd": self.cwd,
            "created": self.created,
            "lastEvent": self.last_event,
            "turns": len(self.turns),
            "events": self.events,
            "size": self.size,
            "loops": self.loops_total,
            "loopKinds": self.loop_kinds,
            "signals": self.signals_total,
            "signalKinds": self.signal_kinds,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "tokensEstimated": self.usage_estimated,
            "loopTokens": self.loop_tokens_total,
            "loopTokensEstimated": self.loop_tokens_estimated,
            "models": sorted(self.usage),
            "dollars": None if total is None else round(total, 6),
            "loopDollars": None if loops is None else round(loops, 6),
            "cleanMessages": self.clean_messages,
            "cleanChars": self.clean_chars,
        }

    @property
    def loop_turns(self) -> dict[int, list[int]]:
        """Turn -> indices into ``loops`` (narration runs count for their first turn)."""
        out: dict[int, list[int]] = {}
        for number, loop in enumerate(self.loops):
            if loop.finding.turn is not None:
                out.setdefault(loop.finding.turn, []).append(number)
        return out

    @property
    def signal_turns(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for number, signal in enumerate(self.signals):
            if signal.turn is not None:
                out.setdefault(signal.turn, []).append(number)
        return out

    def wanted_seqs(self) -> set[int]:
        """Seqs the second pass must find: the loops' messages and the evidence shown."""
        seqs = {loop.finding.seq for loop in self.loops if loop.finding.kind == "loop"}
        for signal in self.signals:
            seqs.update(signal.evidence[:MAX_EVIDENCE_EVENTS])
        return seqs


def loop_kind(finding: Finding) -> str:
    return f"{finding.rule} · {finding.channel}"


def signal_kind(signal: DetourSignal) -> str:
    return signal.kind if signal.sub is None else f"{signal.kind} {signal.sub}"


def _count(counts: dict, key: Any) -> None:
    counts[key] = counts.get(key, 0) + 1


class SessionFold:
    """Pass 1: loops, signals and the turn tallies of one session."""

    def __init__(
        self, report: SessionReport, header: Mapping[str, Any], config: LoopRescueConfig
    ) -> None:
        self.report = report
        report.session_id = str(header.get("id", ""))
        report.cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else None
        report.created = header.get("createdAt")
        self._scanner = SessionScanner(report.session_id, report.path, config)
        self._doctor = SessionAnalysis(report.session_id, config.doctor, header=dict(header))
        self._turns: dict[int, TurnTally] = {}
        self._current: TurnTally | None = None
        self._cut_seqs: set[int] = set()

    def feed(self, record: Record) -> None:
        report = self.report
        report.events += 1
        time = record.event.get("time")
        if isinstance(time, int | float):
            report.last_event = time
        if isinstance(record.view, AssistantMessage):
            self._usage(record.event, record.view)
        if not record.skipped:
            for finding in self._scanner.feed(record):
                self._finding(finding)
            for signal in self._doctor.feed(record.event):
                self._signal(signal)
        self._tally(record, time)

    def finish(self) -> SessionReport:
        for finding in self._scanner.finish():
            self._finding(finding)
        for signal in self._doctor.finish():
            self._signal(signal)
        self.report.turns = [self._turns[number] for number in sorted(self._turns)]
        return self.report

    def _finding(self, finding: Finding) -> None:
        if not finding.is_loop:
            return
        report = self.report
        report.loops_total += 1
        model = finding.model or ""
        report.loop_tokens[model] = report.loop_tokens.get(model, 0) + finding.tokens
        report.loop_tokens_estimated |= finding.tokens_from != "usage"
        if finding.kind == "loop" and finding.source == "message":
            if finding.seq not in self._cut_seqs:
                self._cut_seqs.add(finding.seq)
                report.clean_messages += 1
            report.clean_chars += finding.loop_chars
        _count(report.loop_kinds, loop_kind(finding))
        if finding.turn is not None:
            _count(report.loop_counts, finding.turn)
        if len(report.loops) < MAX_LOOPS:
            report.loops.append(LoopContext(finding))

    def _usage(self, event: dict, view: AssistantMessage) -> None:
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        usage = data.get("usage") if isinstance(data, dict) else None
        model = message_model(data) or ""
        pair = self.report.usage.setdefault(model, [0, 0])
        counts = [
            usage.get(name) if isinstance(usage, dict) else None
            for name in ("inputTokens", "outputTokens")
        ]
        if all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
            pair[0] += counts[0]  # type: ignore[operator]
            pair[1] += counts[1]  # type: ignore[operator]
            return
        self.report.usage_estimated = True
        pair[1] += sum(estimate_tokens(block.text or "") for block in view.blocks)

    def _signal(self, signal: DetourSignal) -> None:
        report = self.report
        report.signals_total += 1
        _count(report.signal_kinds, signal_kind(signal))
        if signal.turn is not None:
            _count(report.signal_counts, signal.turn)
        if len(report.signals) < MAX_SIGNALS:
            report.signals.append(signal)

    def _tally(self, record: Record, time: Any) -> None:
        kind, data = record.type, ev.data_of(record.event)
        if kind == "turn/start":
            number = ev.int_field(data, "turn")
            if number is not None:
                self._current = self._turns.setdefault(number, TurnTally(number))
                self._current.started = time
            return
        if isinstance(record.view, SessionTitle):
            self.report.title = record.view.title
        turn = self._turn_of(data)
        if turn is None:
            return
        if kind == "turn/end":
            reason = data.get("reason")
            turn.ended = time
            if isinstance(reason, Mapping) and isinstance(reason.get("kind"), str):
                turn.end_reason = reason["kind"]
        elif kind == "step/start":
            turn.steps += 1
        elif kind == "assistant/message":
            turn.messages += 1
        elif kind == "tool/call":
            turn.tool_calls += 1
        elif kind == "tool/result" and ev.tool_result_facts(record.event).failed:
            turn.tool_failures += 1
        elif kind == "llm/retry":
            turn.retries += 1
        elif kind == "user/message" and not turn.prompt and ev.user_source_kind(data) == "user":
            turn.prompt = clip(ev.text_of_blocks(data.get("content")), PROMPT_CHARS)

    def _turn_of(self, data: Mapping[str, Any]) -> TurnTally | None:
        """The turn an event belongs to: its own ``turn`` field, else the open turn."""
        number = ev.int_field(data, "turn")
        if number is None:
            return self._current
        if self._current is not None and self._current.turn == number:
            return self._current
        return self._turns.setdefault(number, TurnTally(number))


class DetailFold:
    """Pass 2: the text around each loop and a summary of each evidence event."""

    def __init__(self, report: SessionReport) -> None:
        self.report = report
        self.wanted = report.wanted_seqs()
        self._by_seq: dict[int, list[LoopContext]] = {}
        for loop in report.loops:
            if loop.finding.kind == "loop":
                self._by_seq.setdefault(loop.finding.seq, []).append(loop)
        self.last_wanted = max(self.wanted, default=-1)

    @property
    def done(self) -> bool:
        return len(self.report.evidence) >= len(self.wanted) and all(
            loop.found for loops in self._by_seq.values() for loop in loops
        )

    def feed(self, record: Record) -> None:
        seq = record.event.get("seq")
        if seq not in self.wanted:
            return
        self.report.evidence[seq] = summarize_event(record)
        for loop in self._by_seq.get(seq, ()):
            text = block_text(record, loop.finding)
            if text is not None:
                fill_context(loop, text)


def block_text(record: Record, finding: Finding) -> str | None:
    """The text of the block a finding names, from its message or its attempt's stream."""
    view, index = record.view, finding.block
    if index is None:
        return None
    if finding.source == "attempt" and isinstance(view, Attempt):
        return "".join(text for _, i, text in text_deltas(view.stream) if i == index)
    if isinstance(view, AssistantMessage) and 0 <= index < len(view.blocks):
        return view.blocks[index].text
    return None


def fill_context(loop: LoopContext, text: str) -> None:
    finding = loop.finding
    prune = finding.prune_offset if finding.prune_offset is not None else len(text)
    onset = min(finding.loop_start if finding.loop_start is not None else prune, prune)
    start = max(0, onset - CONTEXT_CHARS)
    loop.omitted_before = start
    loop.before = text[start:onset]
    loop.kept_copy = middle_clip(text[onset:prune], COPY_CHARS)
    loop.pruned = text[prune : prune + PRUNED_CHARS]
    loop.pruned_more = max(0, len(text) - prune - len(loop.pruned))
    loop.found = True


def summarize_event(record: Record) -> EventSummary:
    """One line saying what an event is, for a signal's evidence."""
    event, kind = record.event, record.type
    data = ev.data_of(event)
    if kind == "tool/call":
        text = f"{data.get('name')}({data.get('arguments') or ''})"
    elif kind == "tool/result":
        facts = ev.tool_result_facts(event)
        status = f"failed ({facts.error_code})" if facts.failed and facts.error_code else None
        status = status or ("failed" if facts.failed else "ok")
        text = f"{status}: {facts.text}"
    elif kind == "assistant/message":
        text = ev.assistant_text(data) or "(no visible text)"
    elif kind == "user/message":
        text = f"[{ev.user_source_kind(data) or 'user'}] {ev.text_of_blocks(data.get('content'))}"
    else:
        text = _compact_json(data)
    return EventSummary(
        seq=record.seq,
        type=kind,
        turn=ev.int_field(data, "turn"),
        step=ev.int_field(data, "step"),
        text=clip(text, EVENT_CHARS),
    )


def _compact_json(data: Any) -> str:
    try:
        return orjson.dumps(data).decode()[: EVENT_CHARS * 2]
    except TypeError:
        return repr(data)[: EVENT_CHARS * 2]


def fold_session(
    report: SessionReport,
    header: Mapping[str, Any],
    first_pass: Iterable[Record],
    second_pass: Iterable[Record],
    config: LoopRescueConfig,
) -> SessionReport:
    """Both passes over one session's records (``second_pass`` is read only as far as the
    last seq it needs)."""
    fold = SessionFold(report, header, config)
    for record in first_pass:
        fold.feed(record)
    fold.finish()
    details = DetailFold(report)
    if details.wanted:
        for record in second_pass:
            details.feed(record)
            if details.done or record.event.get("seq", -1) >= details.last_wanted:
                break
    return report
