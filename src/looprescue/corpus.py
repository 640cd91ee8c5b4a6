"""Labelled loop corpora (JSON Lines) and their scoring, as the corpus README defines it."""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from looprescue.config import DetectorConfig
from looprescue.detect import StreamDetector

LABELS = ("loop", "normal", "borderline")
# Loop excerpts shorter than this are continued by repeating their looping part, so that a
# detector is not asked to judge a few hundred chars a real stream would have continued.
MIN_LOOP_CHARS = 1200


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

    def scored_text(self) -> str:
        """The text as scored: short loop excerpts continued by repeating text[onset:]."""
        if self.label != "loop" or self.onset is None:
            return self.text
        looping = self.text[self.onset :]
        if not looping or len(looping) >= MIN_LOOP_CHARS:
            return self.text
        copies = -(-MIN_LOOP_CHARS // len(looping))  # ceil
        return self.text[: self.onset] + looping * copies


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
    return Record(
        data["id"], data["label"], data["channel"], data["text"], onset, data.get("kind"), number
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
            "early": self.early,
            "chars": self.scored_chars,
        }


def judge(record: Record, config: DetectorConfig, rng: random.Random) -> Verdict:
    """Stream one record through a fresh detector in random 2-6 char deltas."""
    text = record.scored_text()
    detector = StreamDetector(config, watch="both")
    consumed = 0
    for delta in random_deltas(text, rng):
        consumed += len(delta)
        hit = detector.feed(record.channel, delta)
        if hit is not None:
            return Verdict(record, consumed, hit.rule, hit.prune_offset, len(text))
    hit = detector.flush(record.channel)
    if hit is not None:
        return Verdict(record, consumed, hit.rule, hit.prune_offset, len(text))
    return Verdict(record, None, None, None, len(text))


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
        return all(v.correct for v in self.verdicts)

    def delay_stats(self) -> dict[str, float | None]:
        if not self.delays:
            return {"median": None, "p90": None, "max": None}
        ordered = sorted(self.delays)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * (len(ordered) - 1) + 0.5))]
        return {"median": statistics.median(ordered), "p90": p90, "max": ordered[-1]}

    def to_dict(self) -> dict:
        return {
            "loops": self.loops,
            "detected": self.detected,
            "recall": self.recall,
            "recall_by": {k: {"detected": d, "total": t} for k, (d, t) in self.recall_by.items()},
            "normals": self.normals,
            "false_positives": self.false_positives,
            "delay": self.delay_stats(),
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
