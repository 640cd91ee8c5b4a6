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

A clause too short to count (``灯烛、``, ``ok,``) but with a letter in it, said
``cycleShortRepeats`` times in a row, is judged as the sentence is scanned, in offset order with
the other rules: it fires at the mark after its last copy, before the sentence ends (a list of
one name ran on for 33 copies in one sentence of SmolLM2's). ``cycle`` would count it too, but
only at its next checkpoint.

A sentence that goes on saying a handful of clauses is such a loop too, though no clause comes
back to back: ``也可以漫步苏堤，感受春风拂面，又可以漫步苏堤，感受春风拂面，…``, its
connective changing, on and on with no sentence end. It is judged as the sentence is
scanned: of its last ``HANDFUL_WINDOW`` times ``cycleClauseRepeats`` clauses of words, at most
``HANDFUL_KINDS`` kinds (clauses one token apart, with the same numbers, are one kind), one of
them said once more than ``cycleClauseRepeats``, and not all the same text. A clause with
another number is another case or step, and a sentence of new clauses has many kinds.

Prune point: after the first copy (a periodic loop keeps one copy), at the second's start; for
a handful, where the run of its clauses began, its first unit kept (up to where the kind of
its first clause comes again).

Watermark: the sentence being written is followed clause by clause as it arrives; from a
clause's second copy on, the text is held while the clause being written could be one more
copy, and once a run has its copies, until the sentence ends and is judged. Sentences up to
the segmenter's ``LONG_UNIT`` are judged (not only those short enough to be a phrase).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect import tally
from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import LONG_UNIT
from looprescue.detect.nearcopy import edit_distance_up_to
from looprescue.detect.rule import CLAUSES, OPEN_SENTENCE, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import (
    CLAUSE_MARK,
    CLAUSE_MARKS,
    NO_SPACES_SCRIPT,
    is_clause_of_words,
    letters_in,
)
from looprescue.detect.text import LONG_SENTENCE, TOKEN, excerpt

_FEEDS: Final = frozenset({CLAUSES, OPEN_SENTENCE, WATERMARK})

# One clause: text up to and including a clause mark and the space after it, or the rest
# (in a sentence still being written a clause ends at its mark: the space may be on its way).
_CLAUSE: Final = re.compile(f"[^{CLAUSE_MARKS}]*(?:[{CLAUSE_MARKS}]\\s*|$)")
_SENTENCE_MARKS: Final = "。！？.!?…\n \t"


def _ends_with(longer: str, body: str) -> bool:
    """``longer`` ends with the clause ``body``, from a word's start."""
    if len(longer) <= len(body) or not longer.endswith(body) or not is_clause_of_words(body):
        return False
    before = longer[-len(body) - 1]
    return before.isspace() or NO_SPACES_SCRIPT.match(body) is not None


def _short_clause(body: str) -> bool:
    """A clause too short to be one of words (``灯烛``, ``very``) with a letter in it: the
    clauses of words are judged when their sentence ends, at ``cycleClauseRepeats`` copies."""
    return letters_in(body) > 0 and not is_clause_of_words(body)


# Clauses drawn from a handful, inside one unending sentence: of the last HANDFUL_WINDOW
# times ``cycleClauseRepeats`` clauses of words, at most HANDFUL_KINDS kinds, one of them said
# once more than ``cycleClauseRepeats`` (clauses one token apart are one kind:
# ``也可以漫步苏堤``, ``又可以漫步苏堤``), and not all of them the same text (that is a plain
# stutter, judged at ``cycleClauseRepeats`` copies).
HANDFUL_WINDOW: Final = 4
HANDFUL_KINDS: Final = 3


class _Handful:
    """The clauses of words of one sentence, each by its kind, and the last few of them: a
    sentence that only says a handful of clauses again and again (``也可以漫步苏堤，感受春风拂面，
    又可以漫步苏堤，感受春风拂面，``), its connective changing, has no clause said back to back,
    yet nothing new comes."""

    def __init__(self, need: int) -> None:
        self._size = HANDFUL_WINDOW * need  # the clauses judged
        self._top = need + 1  # the copies of its commonest kind
        self._kinds: list[list[str]] = []  # each kind's first clause, as tokens
        self._written: list[str] = []  # and as written
        self._said: list[tuple[int, int]] = []  # (kind, where the clause starts), in order
        self._window: deque[int] = deque()
        self._counts: dict[int, int] = {}  # the window's kinds, how many of each
        self._bodies: deque[str] = deque()  # the window's clauses as written
        self.found: tuple[int, int, int, str] | None = None
        # where a cut could fall while the window may still become a handful (None: nowhere)
        self.hold: int | None = None

    def add(self, body: str, at: int) -> None:
        if not is_clause_of_words(body):
            return  # (too short to count: neither a member nor a break)
        tokens = TOKEN.findall(body.casefold())
        numbers = [token for token in tokens if token[0].isdigit()]
        window, counts = self._window, self._counts
        kind = -1
        for known in counts:  # (at most a window's kinds to compare with)
            other = self._kinds[known]
            if edit_distance_up_to(other, tokens, 1) <= 1 and numbers == [
                token for token in other if token[0].isdigit()
            ]:  # (a clause with another number says something new: a case, a step)
                kind = known
                break
        if kind < 0:
            kind = len(self._kinds)
            self._kinds.append(tokens)
            self._written.append(body)
        self._said.append((kind, at))
        window.append(kind)
        self._bodies.append(body)
        tally.add(counts, kind)
        if len(window) > self._size:
            tally.drop(counts, window.popleft())
            self._bodies.popleft()
        if len(counts) > HANDFUL_KINDS:
            self.hold = None  # (most sentences: their clauses say new things)
            return
        kinds = set(counts)
        said_again = {b for k, b in zip(window, self._bodies, strict=True) if counts[k] >= 2}
        if len(said_again) < 2:
            # one clause said again as it was: a plain stutter, which its own run judges at
            # ``cycleClauseRepeats`` copies
            self.hold = None
            return
        unit = self._unit(kinds)
        self.hold = unit[1] if unit is not None else None
        if unit is not None and len(window) == self._size and max(counts.values()) >= self._top:
            self.found = unit

    def _unit(self, kinds: set[int]) -> tuple[int, int, int, str] | None:
        """The run of the handful's clauses: it began where the clauses before it stop being
        them; its first unit, kept, goes up to where its first kind comes again."""
        said = self._said
        first = len(said) - 1
        while first > 0 and said[first - 1][0] in kinds:
            first -= 1
        for start in range(first, len(said)):
            opening = said[start][0]
            again = next((at for kind, at in said[start + 1 :] if kind == opening), -1)
            if again >= 0:  # (a kind said once opens no unit: the next one does)
                copies = len(said) - start
                return said[start][1], again, copies, self._written[opening]
        return None


class _Runs:
    """Clauses of one sentence taken one by one: the current run of copies, and the earliest
    run that reached ``need`` copies. Whether a clause counts (``counts``, by default
    ``is_clause_of_words``) is only asked once it is said again: most clauses never are."""

    def __init__(
        self,
        need: int,
        counts: Callable[[str], bool] = is_clause_of_words,
        handful: _Handful | None = None,
    ) -> None:
        self.need = need
        self._counter = counts
        self._handful = handful  # (the clauses also judged as drawn from a handful)
        self.by_handful = False  # whether ``found`` is the handful's
        self.last, self.last_at = "", 0  # the clause before, and where it starts
        self.run = self.first = self.second = 0  # copies in the run, where the first two start
        self._counts: bool | None = None  # whether ``last`` counts (None: not asked yet)
        self.found: tuple[int, int, int, str] | None = None  # (first, second, copies, clause)

    def has_found(self) -> bool:
        return self.found is not None

    def take(self, win: TextWindow, clause_start: int, scanned: int, stop: int) -> int:
        """Add the clauses whose marks lie between ``scanned`` and ``stop``, the first one
        starting at ``clause_start``; return where the clause after them starts. Stops at the
        mark where a run has its copies (what comes after is not needed)."""
        raw, base = win.raw, win.base
        at = scanned - base
        search = CLAUSE_MARK.search
        while (mark := search(raw, at, stop - base)) is not None:
            at = mark.end()
            piece = raw[clause_start - base : at]
            self.add(_body(piece), clause_start + len(piece) - len(piece.lstrip()))
            clause_start = at + base
            if self.found is not None:
                break
        return clause_start

    def _last_counts(self) -> bool:
        if self._counts is None:
            self._counts = self._counter(self.last)
        return self._counts

    def add(self, body: str, at: int) -> None:
        handful = self._handful
        if handful is not None and self.found is None:
            handful.add(body, at)
            if handful.found is not None:
                self.found, self.by_handful = handful.found, True
        if body == self.last and self.run and self._last_counts():
            self.run += 1
        elif self.run == 1 and _ends_with(self.last, body):
            # the first copy is the end of a longer clause: "In this table we can…, we can…"
            # (a clause that does not count cannot end with one that does; whether ``body``
            # counts is asked below, when its next copy comes)
            self.run, self.first, self._counts = 2, self.last_at + len(self.last) - len(body), None
        else:
            self.last, self.last_at, self.run, self.first, self._counts = body, at, 1, at, None
            return
        if self.run == 2:
            self.second = at
        self.last, self.last_at = body, at
        if self.run >= self.need and self.found is None:
            self.found = (self.first, self.second, self.run, body)

    def hold_from(self, partial: str, at: int) -> int | None:
        """Where a cut could still fall, with ``partial`` (at ``at``) the clause being written
        and no run confirmed yet: at a run's second copy while the run may go on, or at the
        clause being written while it may be a second copy (of any clause: counting is left to
        the judgement, a hold only costs a few chars of lag)."""
        body = _body(partial)
        if self.run >= 2:
            return self.second if self.last.startswith(body) else None
        return at if self.run and body in self.last else None


def _body(piece: str) -> str:
    return piece.rstrip(CLAUSE_MARKS + _SENTENCE_MARKS).lstrip()


class StutterRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("stutter",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        self._channel = channel
        self._need = max(2, math.ceil(cfg.cycleClauseRepeats))
        # the watermark's view of the sentence being written: its start, the clauses taken
        # from it so far and where the next one starts
        self._returned = 0  # the watermark given last
        self._open_from = -1
        self._open_handful = _Handful(self._need)
        self._open = _Runs(self._need, handful=self._open_handful)
        self._open_next = 0  # where the clause being written starts
        self._open_scanned = 0  # chars searched for clause marks up to here
        # The sentence being written, as the segmenter scans it (in offset order with the
        # other rules, so the same text fires at the same clause in any chunking): a short
        # clause (``灯烛、`` x 10) repeated ``cycleShortRepeats`` times fires there and then.
        self._short_need = max(2, math.ceil(cfg.cycleShortRepeats))
        self._scan_from = -1
        self._scan = _Runs(self._short_need, _short_clause, _Handful(self._need))
        self._scan_next = 0  # where the clause being scanned starts
        self._scan_pos = 0  # chars searched for clause marks up to here

    def on_clauses(self, sentence: str, start: int, end: int) -> Hit | None:
        if sentence is LONG_SENTENCE:
            return None
        # three copies of a clause need two clause marks (most sentences have fewer)
        mark = CLAUSE_MARK.search(sentence)
        if mark is None or (self._need > 2 and CLAUSE_MARK.search(sentence, mark.end()) is None):
            return None
        runs = _Runs(self._need)
        pos = start
        for match in _CLAUSE.finditer(sentence):
            piece = match.group()
            if not piece:
                break
            runs.add(_body(piece), pos + len(piece) - len(piece.lstrip()))
            pos += len(piece)
            if runs.found is not None:
                return self._hit(*runs.found, end)
        return None

    def on_open_sentence(self, win: TextWindow, sentence_from: int, stop: int) -> Hit | None:
        """The sentence from ``sentence_from`` is unfinished, and scanned up to ``stop``: a
        short clause with a letter in it said ``cycleShortRepeats`` times in a row in it fires
        at the mark that ends the last copy. (A list of one name, ``灯烛、灯烛、…``, is a loop
        as soon as a short unit's copies are; waiting for the sentence end lets it run on.)"""
        if sentence_from != self._scan_from:
            self._scan_from = self._scan_next = self._scan_pos = sentence_from
            self._scan = _Runs(self._short_need, _short_clause, _Handful(self._need))
        runs = self._scan
        if stop - sentence_from > LONG_UNIT or runs.has_found() or stop <= self._scan_pos:
            return None
        self._scan_next = runs.take(win, self._scan_next, self._scan_pos, stop)
        self._scan_pos = stop
        found = runs.found
        if found is None:
            return None
        first, second, copies, clause = found
        return self._hit(first, second, copies, clause, self._scan_next)  # at the last mark

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Hold a stutter back while its sentence is being written: it is judged when the
        sentence ends, and cut at its second copy. Each char is searched for a clause mark
        once, and each clause read once. What went out stays out: a handful's second unit,
        let go before its clauses were seen to come back, is the hit's lead-in."""
        held = self._held(win, segmenter)
        self._returned = held
        return held

    def _held(self, win: TextWindow, segmenter: Segmenter) -> int:
        sentence_from, end = segmenter.sentence_from, win.end
        if sentence_from != self._open_from:
            self._open_from = self._open_next = self._open_scanned = sentence_from
            self._open_handful = _Handful(self._need)
            self._open = _Runs(self._need, handful=self._open_handful)
        if end - sentence_from > LONG_UNIT:
            return end  # (the segmenter judges no longer sentence by its text)
        runs = self._open
        if self._open_scanned < end:
            if win.last_mark >= self._open_scanned:  # (mostly no clause mark came since)
                self._open_next = runs.take(win, self._open_next, self._open_scanned, end)
            self._open_scanned = end
        found = runs.found
        if found is not None:
            if runs.by_handful:
                return max(found[1], self._returned)  # (see below)
            return found[1]
        # a handful of clauses may be forming: held from where its cut would fall, but not
        # back from what this rule let out already (the hit counts that as its lead-in)
        handful = self._open_handful.hold
        handful = end if handful is None else max(handful, self._returned)
        start = self._open_next
        if not runs.run or end - start > len(runs.last) + 8:
            return handful  # (longer than the clause plus a mark and spaces: no copy of it)
        partial = win.raw[start - win.base : end - win.base]
        held = runs.hold_from(partial, start + len(partial) - len(partial.lstrip()))
        return handful if held is None else min(held, handful)

    def _hit(self, loop_start: int, prune: int, copies: int, clause: str, end: int) -> Hit:
        return Hit(
            rule="stutter",
            channel=self._channel,
            prune_offset=prune,
            loop_start=loop_start,
            fired_at=end,
            repeats=float(copies),
            period=prune - loop_start,
            evidence=excerpt(clause),
            # (a handful's second unit may have gone out before its clauses came back: the
            # channel, which knows what went out, counts it as the lead-in)
        )
