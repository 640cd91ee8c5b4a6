"""Propose loop onsets for a text, as corpus/README.md defines them.

A proposal is only a starting point for a person reading the text: it finds the maximal
periodic run (optionally with digit runs collapsed, for counter loops), then moves its start
forward to the first complete copy aligned on a line start. Pool loops have no period; for
them ``pool_onset`` finds the first line after which every line is drawn from a given pool.

    python -m e2e.onsets corpus/raw/smollm2-raw.jsonl [ID ...]
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass

DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Run:
    start: int  # first char of the maximal periodic run
    end: int  # one past its last char
    period: int
    onset: int  # start moved forward to the first complete, aligned copy

    @property
    def copies(self) -> float:
        return (self.end - self.onset) / self.period


def collapse_digits(text: str) -> tuple[str, list[int]]:
    """``text`` with each digit run replaced by one ``0``, and each collapsed char's source
    offset (one extra entry for the end)."""
    out: list[str] = []
    where: list[int] = []
    pos = 0
    for match in DIGITS.finditer(text):
        for offset in range(pos, match.start()):
            out.append(text[offset])
            where.append(offset)
        out.append("0")
        where.append(match.start())
        pos = match.end()
    for offset in range(pos, len(text)):
        out.append(text[offset])
        where.append(offset)
    where.append(len(text))
    return "".join(out), where


def maximal_runs(text: str, max_period: int = 1500, min_copies: float = 3.0) -> list[Run]:
    """For each period, the longest stretch where ``text[i] == text[i + period]``; keep those
    holding at least ``min_copies`` copies, primitive periods only, best coverage first."""
    best: dict[int, tuple[int, int]] = {}
    n = len(text)
    for period in range(1, min(max_period, n // 2) + 1):
        run_start = 0
        longest = (0, 0)
        for i in range(n - period):
            if text[i] != text[i + period]:
                if i - run_start > longest[1] - longest[0]:
                    longest = (run_start, i)
                run_start = i + 1
        if n - period - run_start > longest[1] - longest[0]:
            longest = (run_start, n - period)
        start, stop = longest
        length = stop - start + period  # chars covered by the periodic stretch
        if length >= min_copies * period:
            best[period] = (start, start + length)
    runs = []
    for period, (start, end) in best.items():
        # a multiple of a smaller period covering the same stretch is not primitive
        if any(
            period % smaller == 0 and best[smaller][0] <= start and best[smaller][1] >= end
            for smaller in best
            if smaller < period
        ):
            continue
        runs.append(Run(start, end, period, align(text, start, period)))
    runs.sort(key=lambda r: (-(r.end - r.onset), r.period))
    return runs


def align(text: str, start: int, period: int) -> int:
    """The first start of a non-blank line in ``[start, start + period)``; failing that (a unit
    inside one line), the first word start; failing that (no whitespace: CJK), ``start``."""
    window = range(start, start + period)
    line_starts = [pos for pos in window if pos == 0 or text[pos - 1] == "\n"]
    for pos in line_starts:
        if not text[pos].isspace():  # a line with content, not the blank line between copies
            return pos
    if line_starts:
        return line_starts[0]
    for pos in window:
        if text[pos - 1].isspace() and not text[pos].isspace():
            return pos
    return start


def counter_runs(text: str, **kwargs) -> list[Run]:
    """Periodic runs with digit runs collapsed, mapped back to offsets in ``text``."""
    collapsed, where = collapse_digits(text)
    runs = []
    for run in maximal_runs(collapsed, **kwargs):
        start, end, onset = where[run.start], where[run.end], where[run.onset]
        runs.append(Run(start, end, run.period, onset))
    return runs


def pool_onset(text: str, pool: set[str]) -> int | None:
    """Offset of the first line after which every non-empty line is in ``pool``."""
    lines = text.splitlines(keepends=True)
    offset = len(text)
    onset = None
    for line in reversed(lines):
        offset -= len(line)
        if not line.strip():
            continue
        if line.strip() not in pool:
            break
        onset = offset
    return onset


def propose(text: str) -> dict:
    verbatim = maximal_runs(text)[:3]
    counter = counter_runs(text)[:3]

    def show(run: Run) -> dict:
        unit = text[run.onset : run.onset + run.period]
        return {
            "onset": run.onset,
            "run": [run.start, run.end],
            "period": run.period,
            "copies": round(run.copies, 1),
            "unit": unit[:80],
        }

    return {"verbatim": [show(r) for r in verbatim], "counter": [show(r) for r in counter]}


def main(argv: list[str]) -> int:
    path, *ids = argv
    with open(path, encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle]
    for record in records:
        if ids and record["id"] not in ids:
            continue
        print(
            record["id"],
            len(record["text"]),
            json.dumps(propose(record["text"]), ensure_ascii=False),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
