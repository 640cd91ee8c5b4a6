"""Rule ``stutter``: one clause said again and again, back to back, inside a sentence.

``在这个表格中，我们可以使用一个表格，用于表示一个系统，用于表示一个系统，用于表示一个系统，用于表示一个
系统。`` A reader sees the glitch at the third copy, and prose has no use for it: emphasis
repeats a word or a short cry (``no, no, no``, ``加油，加油！``), a refrain repeats lines, a list
names different things. Small models start many loops this way: the clause is said three or
four times, the sentence ends, the next one says it again. ``cycle`` counts such a unit at
``cycleClauseRepeats`` copies too, but finds a run this short (20-60 chars) only when it reaches
one of its checkpoints or spans one of its probes, 24 chars apart.

Judged once per sentence of prose (never in code, lists, tables or quotes, which the segmenter
keeps from this rule): the sentence is split after its clause marks (``，,、；;``) and a run of
``cycleClauseRepeats`` clauses that read the same, whitespace aside, fires. The last clause is
read without its sentence mark, so ``x，x，x。`` is three copies, and the first copy may end a
longer clause (``In this table we can…, we can…, we can…``). A clause counts when it has at
least ``CLAUSE_LETTERS`` letters and two words or more, or is in a script written without
spaces (``shape.is_clause_of_words``): a run of one word (``very, very, very``) is emphasis.

Prune point: after the first copy (a periodic loop keeps one copy), at the second's start.
"""

from __future__ import annotations

import math
import re

from looprescue.config import DetectorConfig
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.shape import CLAUSE_MARKS, NO_SPACES_SCRIPT, is_clause_of_words
from looprescue.detect.text import LONG_SENTENCE, excerpt

# One clause: text up to and including a clause mark and the space after it, or the rest.
_CLAUSE = re.compile(r"[^，,、；;]*(?:[，,、；;]\s*|$)")
_SENTENCE_MARKS = "。！？.!?…\n \t"


def _ends_with(longer: str, body: str) -> bool:
    """``longer`` ends with the clause ``body``, from a word's start."""
    if len(longer) <= len(body) or not longer.endswith(body) or not is_clause_of_words(body):
        return False
    before = longer[-len(body) - 1]
    return before.isspace() or NO_SPACES_SCRIPT.match(body) is not None


class StutterRule:
    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._need = max(2, math.ceil(cfg.cycleClauseRepeats))

    def on_sentence(self, sentence: str, start: int, end: int) -> Hit | None:
        if sentence is LONG_SENTENCE or not any(m in sentence for m in CLAUSE_MARKS):
            return None
        last, last_at = "", 0  # the clause before, and where it starts
        run = first = second = 0  # copies in the current run, where the first two start
        pos = start
        for match in _CLAUSE.finditer(sentence):
            piece = match.group()
            if not piece:
                break
            body = piece.rstrip(CLAUSE_MARKS + _SENTENCE_MARKS).lstrip()
            at = pos + len(piece) - len(piece.lstrip())
            pos += len(piece)
            if run and body == last:
                run += 1
            elif _ends_with(last, body):
                # the first copy is the end of a longer clause: "In this table we can…, we can…"
                run, first, second = 2, last_at + len(last) - len(body), at
            else:
                last, last_at = body, at
                run, first = (1, at) if is_clause_of_words(body) else (0, at)
                continue
            second = at if run == 2 else second
            last, last_at = body, at
            if run >= self._need:
                return self._hit(first, second, end, run, body)
        return None

    def _hit(self, loop_start: int, prune: int, end: int, copies: int, clause: str) -> Hit:
        return Hit(
            rule="stutter",
            channel=self._channel,
            prune_offset=prune,
            loop_start=loop_start,
            fired_at=end,
            repeats=float(copies),
            period=prune - loop_start,
            evidence=excerpt(clause),
        )
