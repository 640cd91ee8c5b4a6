"""What ``scan`` reports for one session: loops inside assistant messages (and failed
attempts) found by the streaming detector, plus cross-message narration loops. Pure: works on
the records of a log (events with their typed views), no files.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass

from looprescue.config import LoopRescueConfig
from looprescue.detect import Hit, StreamDetector, detector_for
from looprescue.detect.asked import largest_count
from looprescue.dsh.narration import NarrationTracker
from looprescue.dsh.records import Record, record_of
from looprescue.dsh.views import AssistantMessage, Attempt, StreamEntry, text_deltas
from looprescue.pruning import first_hit
from looprescue.tokens import estimate_tokens, share_of

CHANNEL_OF_BLOCK = {"reasoning": "reasoning", "text": "text"}
EXCERPT_CHARS = 60


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of scan output.

    ``kind``: ``loop`` (detector hit in one block), ``narration`` (same text across messages)
    or ``miss`` (a scanned block without a loop, shown with ``--all``).
    ``source``: ``message`` (settled assistant/message content) or ``attempt`` (the deltas of
    a failed assistant/attempt). Offsets are code points of the block's text.
    """

    kind: str
    session: str
    path: str
    seq: int
    turn: int | None
    step: int | None
    source: str
    channel: str
    block: int | None
    chars: int
    rule: str | None = None
    prune_offset: int | None = None
    loop_start: int | None = None
    loop_chars: int = 0
    repeats: float | None = None
    period: int | None = None
    excerpt: str = ""
    seqs: tuple[int, ...] = ()
    last_turn: int | None = None  # narration runs can span turns
    # output tokens the loop text cost: the loop's share of its message's usage where the log
    # has one (``tokens_from`` "usage"), else estimated from its chars ("chars")
    tokens: int = 0
    tokens_from: str = "chars"
    model: str | None = None

    @property
    def is_loop(self) -> bool:
        return self.kind != "miss"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["seqs"] = list(self.seqs)
        return data


def excerpt(text: str, start: int = 0) -> str:
    piece = " ".join(text[start : start + EXCERPT_CHARS * 2].split())
    return piece if len(piece) <= EXCERPT_CHARS else piece[: EXCERPT_CHARS - 1] + "…"


def replay_deltas(
    stream: list[StreamEntry],
    config: LoopRescueConfig,
    request: Sequence[str] = (),
    asked_up_to: int | None = None,
) -> dict[int, tuple[str, str, Hit | None]]:
    """Feed a stream's deltas to a StreamDetector exactly as they arrived, one detector per
    block (as a proxy sees a fresh stream per block index). ``{index: (channel, text, hit)}``.
    ``request``, ``asked_up_to``: what the human wrote before it, the latest last
    (``detect.scan_text``)."""
    detectors: dict[int, StreamDetector] = {}
    texts: dict[int, tuple[str, list[str]]] = {}
    hits: dict[int, Hit] = {}
    for channel, index, text in text_deltas(stream):
        texts.setdefault(index, (channel, []))[1].append(text)
        detector = detectors.get(index)
        if detector is None:
            detector = detectors[index] = detector_for(config, request, None, asked_up_to)
        hit = detector.feed(channel, text)  # type: ignore[arg-type]
        if hit is not None and index not in hits:
            hits[index] = hit
    for index, detector in detectors.items():
        if index not in hits:
            channel = texts[index][0]
            hit = detector.flush(channel)  # type: ignore[arg-type]
            if hit is not None:
                hits[index] = hit
    return {i: (ch, "".join(parts), hits.get(i)) for i, (ch, parts) in texts.items()}


class SessionScanner:
    """Feed events in order; collects findings. Attempt loops are held back until their step
    ends and dropped when the settled message of the same step loops in the same channel (the
    retry re-streamed the same text: one loop, not two)."""

    def __init__(self, session: str, path: str, config: LoopRescueConfig | None = None) -> None:
        self.session = session
        self.path = path
        self.config = config or LoopRescueConfig()
        self.narration = NarrationTracker(
            self.config.doctor.narrationMinRepeats, self.config.doctor.narrationMinChars
        )
        self._pending_attempts: list[Finding] = []
        # what the human wrote so far, the latest last: it bounds the answers' lists
        self._request: list[str] = []
        self._asked_up_to = 0  # the largest count it names (read once per message)
        self._step_message_channels: set[str] = set()
        self._step: tuple[int | None, int | None] | None = None

    def feed(self, record: Record) -> list[Finding]:
        kind, view = record.type, record.view
        if view is None:
            return []  # a type scan does not read, or a log-only event skipped as unreadable
        out: list[Finding] = []
        step = (getattr(view, "turn", None), getattr(view, "step", None))
        if kind in ("step/end", "step/start", "turn/end", "turn/start"):
            out.extend(self._close_step())
        elif kind == "assistant/message":
            out.extend(self._message(record.event, view, step))
        elif kind == "user/message":
            said = view.human_text()
            if said:
                self._request.append(said)
                self._asked_up_to = max(self._asked_up_to, largest_count(said))
        elif kind == "assistant/attempt":
            if self._step is not None and self._step != step:
                out.extend(self._close_step())
            self._step = step
            self._pending_attempts.extend(self._attempt(record.event, view, step))
        return out

    def finish(self) -> list[Finding]:
        out = self._close_step()
        run = self.narration.finish()
        if run is not None:
            out.append(self._narration_finding(run))
        return out

    def _close_step(self) -> list[Finding]:
        kept = [
            f
            for f in self._pending_attempts
            if not (f.is_loop and f.channel in self._step_message_channels)
        ]
        self._pending_attempts = []
        self._step_message_channels = set()
        self._step = None
        return kept

    def _message(self, event: dict, view: AssistantMessage, step: tuple) -> list[Finding]:
        out: list[Finding] = []
        if self._step is not None and self._step != step:
            out.extend(self._close_step())
        self._step = step
        visible: list[str] = []
        cost = message_cost(event, view)
        for index, block in enumerate(view.blocks):
            channel = CHANNEL_OF_BLOCK.get(block.type)
            if channel is None or block.text is None:
                continue
            text = block.text
            if channel == "text":
                visible.append(text)
            hit = first_hit(text, channel, self.config, self._request, self._asked_up_to)
            finding = self._finding(event, step, "message", channel, index, text, hit, cost)
            if hit is not None:
                self._step_message_channels.add(channel)
            out.append(finding)
        run = self.narration.observe(event["seq"], step[0], "\n".join(visible))
        if run is not None:
            out.append(self._narration_finding(run))
        return out

    def _attempt(self, event: dict, view: Attempt, step: tuple) -> list[Finding]:
        return [
            self._finding(event, step, "attempt", channel, index, text, hit)
            for index, (channel, text, hit) in sorted(
                replay_deltas(view.stream, self.config, self._request, self._asked_up_to).items()
            )
        ]

    def _finding(
        self, event, step, source, channel, index, text, hit: Hit | None, cost=None
    ) -> Finding:
        base = dict(
            session=self.session,
            path=self.path,
            seq=event["seq"],
            turn=step[0],
            step=step[1],
            source=source,
            channel=channel,
            block=index,
            chars=len(text),
        )
        if hit is None:
            return Finding(kind="miss", excerpt=excerpt(text), **base)
        loop_chars = len(text) - hit.prune_offset
        if cost is not None and cost[0] is not None:
            tokens, tokens_from = share_of(cost[0], loop_chars, cost[1]), "usage"
        else:
            tokens, tokens_from = estimate_tokens(text[hit.prune_offset :]), "chars"
        return Finding(
            tokens=tokens,
            tokens_from=tokens_from,
            model=cost[2] if cost is not None else None,
            kind="loop",
            rule=hit.rule,
            prune_offset=hit.prune_offset,
            loop_start=hit.loop_start,
            loop_chars=loop_chars,
            repeats=hit.repeats,
            period=hit.period,
            excerpt=excerpt(text, hit.prune_offset),
            **base,
        )

    def _narration_finding(self, run) -> Finding:
        return Finding(
            kind="narration",
            session=self.session,
            path=self.path,
            seq=run.seqs[0],
            turn=run.turns[0],
            step=None,
            source="message",
            channel="text",
            block=None,
            chars=run.chars,
            rule="narration",
            loop_chars=run.chars * (run.repeats - 1),
            repeats=float(run.repeats),
            excerpt=excerpt(run.text),
            tokens=estimate_tokens(run.text) * (run.repeats - 1),
            seqs=run.seqs,
            last_turn=run.turns[-1],
        )


def message_cost(event: dict, view: AssistantMessage) -> tuple[int | None, int, str | None]:
    """(output tokens of the message from its usage, or None; chars of its blocks; model)."""
    data = event.get("data") if isinstance(event.get("data"), dict) else {}
    usage = data.get("usage")
    output = usage.get("outputTokens") if isinstance(usage, dict) else None
    if not isinstance(output, int) or isinstance(output, bool) or output < 0:
        output = None
    # what the model wrote: its text and reasoning, and the arguments of its tool calls
    chars = sum(len(block.text or "") + len(block.arguments or "") for block in view.blocks)
    return output, chars, message_model(data)


def message_model(data: dict) -> str | None:
    """The model that wrote an assistant message (``message.source.model``), if named."""
    message = data.get("message")
    source = message.get("source") if isinstance(message, dict) else None
    model = source.get("model") if isinstance(source, dict) else None
    return model if isinstance(model, str) and model else None


def scan_records(
    records: Iterable[Record], session: str, path: str, config: LoopRescueConfig | None = None
) -> Iterator[Finding]:
    """All findings (hits and misses) of one session's records, in log order."""
    scanner = SessionScanner(session, path, config)
    for record in records:
        yield from scanner.feed(record)
    yield from scanner.finish()


def scan_events(
    events: Iterable[dict], session: str, path: str, config: LoopRescueConfig | None = None
) -> Iterator[Finding]:
    """The same for event dicts (viewed here; a log's ``records()`` come viewed already)."""
    return scan_records((record_of(event) for event in events), session, path, config)
