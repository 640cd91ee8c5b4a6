"""Labelled loop corpora (JSON Lines) and their scoring, as the corpus README defines it."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector
from looprescue.detect.asked import asked_ranges, asked_sections, largest_count

LABELS = ("loop", "normal", "borderline")
# Loop excerpts shorter than this are continued by repeating their looping part, so that a
# detector is not asked to judge a few hundred chars a real stream would have continued.
MIN_LOOP_CHARS = 1200
# A prune point may sit this many chars past one copy of the unit: the cut is moved to a line or
# sentence start, and indentation or a short line ending can lie in between.
ALIGN_SLACK = 16
# A short exact repeat: a verbatim loop whose unit is at most this long (a line or a sentence),
# the kind a person spots in a few lines and a detector should cut within about 300 chars.
SHORT_UNIT = 80


class CorpusError(ValueError):
    """A corpus record is malformed; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class Record:
    id: str
    label: str
    channel: str
    text: str
    onset: int | None
    kind: str | None
    line: int
    prompt: str | None = None  # the request the text answers, when the corpus has it
    # chars a cut may keep after the onset when the copies are near-copies of another length
    # than the unit (a paragraph whose inner run shrinks): the label's reading, not a guess
    first_copy: int | None = None

    def scored_text(self) -> str:
        """The text as scored: short loop excerpts continued by repeating text[onset:]."""
        if self.label != "loop" or self.onset is None:
            return self.text
        looping = self.text[self.onset :]
        if not looping or len(looping) >= MIN_LOOP_CHARS:
            return self.text
        copies = -(-MIN_LOOP_CHARS // len(looping))  # ceil
        return self.text[: self.onset] + looping * copies

    def allowed_copy(self) -> int:
        """Chars of loop text a cut may keep after the onset: one copy of the unit for a
        periodic loop, nothing for a phrase pool.

        The unit is that of the loop as scored: a short excerpt is continued by repeating its
        looping part, and then that part (trailer and all) is what the stream repeats."""
        if self.label != "loop" or self.onset is None or self.kind == "pool":
            return 0
        if self.first_copy is not None:
            return self.first_copy
        return self._unit(self.scored_text()[self.onset :])

    def unit(self) -> int | None:
        """Length of the repeated unit as the excerpt itself shows it (None: not periodic)."""
        if self.label != "loop" or self.onset is None or self.kind == "pool":
            return None
        return self._unit(self.text[self.onset :])

    def _unit(self, looping: str) -> int:
        # A labelled onset may sit a few chars before the copies line up (a prompt glyph, a
        # partial token): take the best of the first few start offsets.
        return min(
            skip + unit_length(looping[skip:], counter=self.kind == "counter")
            for skip in range(min(ALIGN_SLACK + 1, len(looping)))
        )


def unit_length(looping: str, counter: bool = False) -> int:
    """Length of the first copy of the repeating unit at the start of ``looping``.

    The unit is the period of the longest prefix that holds two copies (1.5 when the excerpt
    holds fewer); for a counter loop digit runs count as one char (the copies' numbers differ),
    and the length returned is the raw one."""
    if counter:
        pieces, starts = [], []
        for match in re.finditer(r"[0-9]+|[^0-9]+", looping):
            token = match.group()
            if token[0].isdigit():
                pieces.append("0")
                starts.append(match.start())
            else:
                pieces.append(token)
                starts.extend(range(match.start(), match.end()))
        folded = "".join(pieces)
    else:
        folded, starts = looping, list(range(len(looping)))
    n = len(folded)
    if n < 2:
        return len(looping)
    border = [0] * n  # KMP prefix function
    k = 0
    for i in range(1, n):
        while k and folded[i] != folded[k]:
            k = border[k - 1]
        if folded[i] == folded[k]:
            k += 1
        border[i] = k
    for need in (2.0, 1.5):
        for m in range(n, 1, -1):
            period = m - border[m - 1]
            if m >= need * period:
                return starts[period] if period < n else len(looping)
    return len(looping)


def load_corpus(path: str | Path) -> list[Record]:
    records = []
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as err:
        raise CorpusError(f"{path}: cannot read: {err.strerror or err}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError as err:
                raise CorpusError(f"{path}:{number}: invalid JSON: {err}") from None
            records.append(_record(data, path, number))
    return records


def _record(data: object, path: Path, number: int) -> Record:
    where = f"{path}:{number}"
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: a record must be a JSON object")
    for key in ("id", "label", "channel", "text"):
        if not isinstance(data.get(key), str):
            raise CorpusError(f"{where}: field {key!r} must be a string")
    if data["label"] not in LABELS:
        raise CorpusError(f"{where}: label {data['label']!r} is not one of {LABELS}")
    if data["channel"] not in ("reasoning", "text"):
        raise CorpusError(f"{where}: channel {data['channel']!r} is not reasoning or text")
    onset = data.get("onset")
    if onset is not None and (not isinstance(onset, int) or not 0 <= onset <= len(data["text"])):
        raise CorpusError(f"{where}: onset must be null or an offset into text")
    prompt = data.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise CorpusError(f"{where}: field 'prompt' must be a string")
    first_copy = data.get("first_copy")
    if first_copy is not None and (
        isinstance(first_copy, bool)
        or not isinstance(first_copy, int)
        or onset is None
        or not 0 < first_copy <= len(data["text"]) - onset
    ):
        raise CorpusError(f"{where}: first_copy must be null or a number of chars after the onset")
    return Record(
        data["id"],
        data["label"],
        data["channel"],
        data["text"],
        onset,
        data.get("kind"),
        number,
        prompt,
        first_copy,
    )


def random_deltas(text: str, rng: random.Random, low: int = 2, high: int = 6) -> Iterator[str]:
    """Split ``text`` into deltas of ``low``..``high`` chars, as real streams arrive."""
    pos = 0
    while pos < len(text):
        step = rng.randint(low, high)
        yield text[pos : pos + step]
        pos += step


@dataclass(slots=True)
class Verdict:
    record: Record
    fired_at: int | None  # chars consumed when the detector fired
    rule: str | None
    prune_offset: int | None
    scored_chars: int
    allowed_copy: int = 0  # chars of loop text the cut may keep (one copy of a periodic unit)
    # chars a proxy had released when the detector fired: it releases up to the watermark
    # (safe_offset) after every delta
    released: int = 0

    @property
    def fired(self) -> bool:
        return self.fired_at is not None

    @property
    def correct(self) -> bool:
        if self.record.label == "loop":
            return self.fired
        if self.record.label == "normal":
            return not self.fired
        return True  # borderline: reported, not scored

    @property
    def delay(self) -> int | None:
        if not self.fired or self.record.onset is None:
            return None
        return max(0, self.fired_at - self.record.onset)

    @property
    def kept_beyond_copy(self) -> int | None:
        """Loop chars the cut keeps beyond the one copy it may keep (pools: beyond the onset);
        the target is 0 up to ``ALIGN_SLACK``."""
        if not self.fired or self.record.onset is None or self.prune_offset is None:
            return None
        return max(0, self.prune_offset - self.record.onset - self.allowed_copy)

    @property
    def shown_beyond_copy(self) -> int | None:
        """Loop chars a client of the proxy saw beyond the one copy a cut may keep (pools:
        beyond the onset): what the watermark had released before the hit, or the kept text
        up to the cut, whichever is more. Near-copies that led into the loop are released
        before the rule fires (no watermark could hold them without holding all text), so
        this can pass ``kept_beyond_copy``."""
        if not self.fired or self.record.onset is None or self.prune_offset is None:
            return None
        shown = max(self.released, self.prune_offset)
        return max(0, shown - self.record.onset - self.allowed_copy)

    @property
    def early(self) -> bool:
        """Fired before the labelled onset (on coherent text, unless it saw a pool's lead-in)."""
        return self.fired and self.record.onset is not None and self.fired_at < self.record.onset

    def to_dict(self) -> dict:
        return {
            "id": self.record.id,
            "label": self.record.label,
            "channel": self.record.channel,
            "kind": self.record.kind,
            "fired": self.fired,
            "correct": self.correct,
            "rule": self.rule,
            "consumed": self.fired_at,
            "prune_offset": self.prune_offset,
            "onset": self.record.onset,
            "delay": self.delay,
            "allowed_copy": self.allowed_copy if self.record.label == "loop" else None,
            "kept_beyond_copy": self.kept_beyond_copy,
            "released": self.released if self.fired else None,
            "shown_beyond_copy": self.shown_beyond_copy,
            "early": self.early,
            "chars": self.scored_chars,
        }


def judge(record: Record, config: DetectorConfig, rng: random.Random) -> Verdict:
    """Stream one record through a fresh detector in random 2-6 char deltas (told the ranges
    and the counts its prompt asks for, as the proxy tells it a request's; a record without a
    prompt is judged as ``scan`` judges a session file), asking for the watermark after
    every delta as a proxy in ``rescue`` does."""
    text = record.scored_text()
    allowed = record.allowed_copy()
    asked = asked_ranges(record.prompt) if record.prompt else ()
    sections = asked_sections(record.prompt) if record.prompt else ()
    asked_up_to = largest_count(record.prompt) if record.prompt else None
    channel = record.channel
    detector = StreamDetector(
        config, watch="both", asked=asked, asked_up_to=asked_up_to, sections=sections
    )
    consumed = released = 0
    for delta in random_deltas(text, rng):
        consumed += len(delta)
        hit = detector.feed(channel, delta)
        if hit is not None:
            return Verdict(
                record, consumed, hit.rule, hit.prune_offset, len(text), allowed, released
            )
        released = detector.safe_offset(channel)
    hit = detector.flush(channel)
    if hit is not None:
        return Verdict(record, consumed, hit.rule, hit.prune_offset, len(text), allowed, released)
    return Verdict(record, None, None, None, len(text), allowed)


@dataclass(slots=True)
class Summary:
    verdicts: list[Verdict]
    recall: float = 0.0
    loops: int = 0
    detected: int = 0
    false_positives: list[str] = field(default_factory=list)
    normals: int = 0
    delays: list[int] = field(default_factory=list)
    recall_by: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            all(v.correct for v in self.verdicts)
            and not self.over_slack()
            and not self.shown_over_slack()
        )

    def kept_beyond(self) -> dict[str, int]:
        """Per loop record that fired: loop chars kept beyond one copy of its unit."""
        return self._per_loop(lambda v: v.kept_beyond_copy)

    def shown_beyond(self) -> dict[str, int]:
        """Per loop record that fired: loop chars a proxy's client saw beyond one copy."""
        return self._per_loop(lambda v: v.shown_beyond_copy)

    def _per_loop(self, chars: Callable[[Verdict], int | None]) -> dict[str, int]:
        found = ((v.record.id, chars(v)) for v in self.verdicts if v.record.label == "loop")
        return {record: n for record, n in found if n is not None}

    def short_exact_delays(self) -> list[int]:
        """Detection delays of the verbatim loops with a short unit."""
        return [
            v.delay
            for v in self.verdicts
            if v.record.label == "loop"
            and v.record.kind == "verbatim"
            and v.delay is not None
            and (v.record.unit() or SHORT_UNIT + 1) <= SHORT_UNIT
        ]

    def over_slack(self) -> list[str]:
        return _over_slack(self.kept_beyond())

    def shown_over_slack(self) -> list[str]:
        return _over_slack(self.shown_beyond())

    def delay_stats(self) -> dict[str, float | None]:
        return _stats(self.delays)

    def to_dict(self) -> dict:
        return {
            "loops": self.loops,
            "detected": self.detected,
            "recall": self.recall,
            "recall_by": {k: {"detected": d, "total": t} for k, (d, t) in self.recall_by.items()},
            "normals": self.normals,
            "false_positives": self.false_positives,
            "delay": self.delay_stats(),
            "short_exact_delay": _stats(self.short_exact_delays()),
            "kept_beyond_copy": _beyond_summary(self.kept_beyond()),
            "shown_beyond_copy": _beyond_summary(self.shown_beyond()),
            "onset_zero_delays": {
                v.record.id: v.delay
                for v in self.verdicts
                if v.record.label == "loop" and v.record.onset == 0 and v.fired
            },
            "early_fires": [
                v.record.id for v in self.verdicts if v.record.label == "loop" and v.early
            ],
            "borderline": {
                v.record.id: v.fired_at for v in self.verdicts if v.record.label == "borderline"
            },
            "ok": self.ok,
        }


def _over_slack(chars: dict[str, int]) -> list[str]:
    return [record for record, n in chars.items() if n > ALIGN_SLACK]


def _beyond_summary(chars: dict[str, int]) -> dict:
    """Loop chars past one copy over the records: total, max, and those past the slack."""
    return {
        "total": sum(chars.values()),
        "max": max(chars.values(), default=0),
        "over_slack": _over_slack(chars),
        "slack": ALIGN_SLACK,
    }


def _stats(values: list[int]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p90": None, "max": None, "n": 0}
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * (len(ordered) - 1) + 0.5))]
    return {"median": statistics.median(ordered), "p90": p90, "max": ordered[-1], "n": len(values)}


def evaluate(records: list[Record], config: DetectorConfig, seed: int = 0) -> Summary:
    rng = random.Random(seed)
    verdicts = [judge(r, config, rng) for r in records]
    summary = Summary(verdicts)
    for v in verdicts:
        label = v.record.label
        if label == "loop":
            summary.loops += 1
            summary.detected += v.fired
            for key in (f"kind:{v.record.kind}", f"channel:{v.record.channel}"):
                d, t = summary.recall_by.get(key, (0, 0))
                summary.recall_by[key] = (d + v.fired, t + 1)
            if v.delay is not None:
                summary.delays.append(v.delay)
        elif label == "normal":
            summary.normals += 1
            if v.fired:
                summary.false_positives.append(v.record.id)
    summary.recall = summary.detected / summary.loops if summary.loops else 1.0
    return summary
