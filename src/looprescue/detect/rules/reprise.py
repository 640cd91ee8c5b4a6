"""Rule ``reprise``: line after line is one the text already said, drawn back in any order.

What it catches. A derivation or a plan worked out again and again, each time from the same
lines: ``0 = 25² + 2(−5)s``, ``0 = 625 − 10s``, ``P = V²/R = 230²/26.45 = 2,000 W``, each
said word for word in every copy, in an order that shifts, with a heading or a connector
swapped among a few (``Let me redo it.``, ``Let me recompute.``). No two copies are the same
text, so there is no period; each line is one statement, as a derivation's lines are, so
``drift`` (paragraphs of prose) leaves them; and they are too long for a pool's phrases.

Why that is a loop. Nearly every line was said before, one of them three times in the run:
the text only comes back, in another order.

What is not a loop. A line counts when it is at least ``MIN_WIDTH`` wide (a CJK char counted as
two) and outside code fences and tables (code and tables end a run: lines alike are how they
are written). Shorter lines (``s = 62.5 m.``, ``Verse 2``) neither count nor break a run. Nor
does a phrase of words said before (no wider than ``poolMaxPhraseChars``, no formula: ``Let me
check the file.``; a pool of them is the ``pool`` rule's, which keeps none of it), nor a list
item said before (a plan's days each with stops drawn from a few, one checklist under every
section: a list's items recur); new, either counts as a new line: new words are progress. A
line said before is one said in the last ``LOOK_BACK`` counted lines, word for word (its
whitespace folded). The verdict reads the last ``WINDOW`` counted lines, and fires only when
all of these hold:

* ``REPRISE_LINES`` of them were said before: at most one in four is new;
* ``THRICE_IN`` in ``THRICE_OF`` of them, and ``MIN_THRICE`` different ones, were said three
  times or more in all: a block comes back a third time, not a formula or two that a trace
  goes back to between its steps, nor a passage said once again;
* one line said before in ``MOVED_PER`` came after another line than it came after last time:
  the lines come back in a new order. A block said again in its own order (a chorus sung
  three times to end a song, one letter to a few people under their own salutations) is the
  periodic rules' to judge, unless ``FORMULAS_IN`` in ``FORMULAS_OF`` of its lines said before
  are formulas or code: no song or letter is made of them, and a derivation worked out again
  in its own order, its connector or its last line changing, has no period either, nor has a
  tool call written out as text again and again, its answer after it, a remark between, nor a
  failing command run again and its output written out each time (a console's lines: a
  command after its prompt, an error named by its type, a path to a file);
* ``MIN_SHAPES`` of its lines differ in their words (a log's readings taking a few values say
  one line with other numbers; a marker said again with its punctuation changing,
  ``所以最终答案是17！``, is a pool's phrase).

Where it cuts. Where the run of lines said before began: at its first line said before, so
the first copy is kept, with the new lines that opened the second. Short lines right before
that line (too short to count: an opening tag, ``<tool_call>``) go with the run when they came
right before it last time too. A run ends at the second
new line in ``NEW_GAP`` lines in a row; one that begins within ``NEW_GAP`` lines after goes on
with its cut, so the cut stays at the second copy however many copies bring a new variant.

What it holds back: nothing (it takes no part in the watermark). A real reasoning trace goes
back to its formulas for a thousand chars at a time; held, it would stall. What the other
rules' watermark let out past the cut is the hit's lead-in (the channel counts it).

How it stays incremental. Lines are read once, at the checkpoint after they end, and looked up
in a dict of the last ``LOOK_BACK`` counted lines (older ones leave it in order); the verdict
reads a window of ``WINDOW`` lines. Memory is bounded by the two.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Final

from looprescue.config import DetectorConfig
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CHECKPOINT, LineRule
from looprescue.detect.segment import Segmenter
from looprescue.detect.shape import text_width
from looprescue.detect.text import LineKind, classify_line, excerpt, notation

_FEEDS: Final = frozenset({CHECKPOINT})
_ITEM: Final = LineKind.LIST_ITEM

# A line counts from this width: a formula line, a heading of a few words. Shorter ones
# (``s = 62.5 m.``, ``}``) come back in any text.
MIN_WIDTH: Final = 12
# A line is said before when it is one of this many counted lines before it.
LOOK_BACK: Final = 200
# The verdict reads the last WINDOW counted lines: at least REPRISE_LINES of them said before,
# at most one in four new (a copy's new connector or variant among them).
WINDOW: Final = 16
REPRISE_LINES: Final = 12
# Lines of the window said three times or more in all: at least THRICE_IN in THRICE_OF of its
# lines, and MIN_THRICE different ones. A block comes back a third time, not a formula or two
# that a derivation goes back to between its steps, nor a passage said once again.
THRICE_IN: Final = 2
THRICE_OF: Final = 3
MIN_THRICE: Final = 3
# At least one line said before in this many came back after another line than last time:
# the lines are drawn back in a new order. A block said again in its order (a chorus sung
# three times to end a song, one letter to four people) is the periodic rules' to judge.
MOVED_PER: Final = 5
# Unless at least FORMULAS_IN in FORMULAS_OF of the lines said before are formulas or code: a
# derivation worked out again in its own order, or a tool call and its answer written out again
# and again, is a loop all the same (no song or letter is made of them).
FORMULAS_IN: Final = 2
FORMULAS_OF: Final = 3
# Lines of the window said before that differ in their words, not only in numbers or marks,
# at least this many.
MIN_SHAPES: Final = 3
# Two new lines within this many counted lines end a run: where the cut is looked for again.
NEW_GAP: Final = 4
# Short lines kept between two counted lines, to begin a run with them.
MAX_SHORTS: Final = 4


# Code outside a fence: a JSON key, or a call (``os.environ.get(``; prose puts a space before
# its brackets); and a console's lines: a command after its prompt, an import, an error
# named by its type, a path to a file (``tests/test_parser.py:3: in <module>``).
_CODE: Final = re.compile(
    r"""(?x)
    "[^"\n]*"\s*: | [\w.]\(
    | ^[$>]\s | ^(?:from\s+\S+\s+)?import\s+\S
    | \b\w*(?:Error|Exception)\b | [\w.-]+/[\w./-]*\.\w{1,5}\b
    """
)


def _formal(line: str) -> bool:
    """Whether a line is a formula or a line of code: no line of a song or a letter."""
    return notation(line) or _CODE.search(line) is not None


def _words(line: str) -> str:
    """What a line says in letters: its numbers, marks and spaces left out."""
    return "".join(char for char in line if char.isalpha())


class _Said:
    """A counted line of the last LOOK_BACK: when it was last said, where it was first said,
    the line said before it last time, how often it was said in all, and the short lines right
    before it last time."""

    __slots__ = ("after", "count", "first", "shorts", "times")

    def __init__(self, count: int, first: int, after: str, shorts: tuple[str, ...]) -> None:
        self.count = count
        self.first = first
        self.after = after
        self.times = 1
        self.shorts = shorts  # the short lines right before it last time


class RepriseRule(LineRule):
    def names(self) -> tuple[str, ...]:
        return ("reprise",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel, cfg: DetectorConfig) -> None:
        super().__init__()
        self._channel = channel
        self._phrase_chars = cfg.poolMaxPhraseChars
        self._counted = 0  # counted lines so far
        self._said: dict[str, _Said] = {}
        self._last = ""  # the counted line before, and whether it was new
        self._after_new = True
        # the last WINDOW counted lines: the line, whether it was said before and came back
        # after another line than last time (None: new)
        self._window: deque[tuple[str, bool | None]] = deque()
        self._window_said = 0  # its lines said before
        self._window_moved = 0  # its lines that came back after another line
        # the run, for the cut: where it begins (None: no run), whether each of its last
        # NEW_GAP lines was new; a run ended by new lines hands its cut on to one that begins
        # within NEW_GAP lines
        self._cut: int | None = None
        self._first_said = 0  # where the run's first line was first said
        self._recent: deque[bool] = deque(maxlen=NEW_GAP)
        self._handed: int | None = None
        self._handed_at = 0
        # the short lines since the last counted line (too short to count: an opening tag,
        # ``Step 2:``) and where the first begins: a run that begins where they came before
        # its line last time begins with them
        self._shorts: list[str] = []
        self._shorts_from = 0

    def on_ended_line(
        self, line: str, start: int, end: int, cp: int, segmenter: Segmenter
    ) -> Hit | None:
        stripped = line.strip()
        if not stripped:
            return None
        if segmenter.code_or_table(stripped, start):
            # code or a table: lines alike are how they are written, and the copies are over
            self._cut = self._handed = None
            self._window.clear()
            self._window_said = self._window_moved = 0
            self._shorts.clear()
            return None
        if len(stripped) < MIN_WIDTH and text_width(stripped) < MIN_WIDTH:
            if not self._shorts:
                self._shorts_from = start
            if len(self._shorts) < MAX_SHORTS:
                self._shorts.append(stripped)
            return None
        shorts = tuple(self._shorts)
        self._shorts.clear()
        folded = " ".join(stripped.split()) if "  " in stripped or "\t" in stripped else stripped
        said = self._said.get(folded)
        if said is not None and self._counted - said.count >= LOOK_BACK:
            said = None  # (said too long ago: not forgotten yet, but new again)
        if said is not None and (self._phrase(stripped) or classify_line(stripped) is _ITEM):
            # a phrase of words said again is a pool's; a list's item said again is the same
            # stop on another day of a plan. New, either says something new.
            return None
        self._counted += 1
        count = self._counted
        if said is None:
            self._said[folded] = _Said(count, start, self._last, shorts)
            self._enter(folded, None)
            self._on_new()
        else:
            moved = not self._after_new and said.after != self._last
            # (the short lines before it, if they came before it last time too)
            begins = self._shorts_from if shorts and shorts == said.shorts else start
            said.count, said.after, said.shorts = count, self._last, shorts
            said.times += 1
            self._enter(folded, moved)
            self._on_said(said, begins)
        if len(self._said) > 2 * LOOK_BACK:
            self._forget(count)
        self._last, self._after_new = folded, said is None
        return self._judge(end) if said is not None else None

    def _on_new(self) -> None:
        if self._cut is None:
            return
        self._recent.append(True)
        if sum(self._recent) >= 2:
            # the run is over; one that begins soon after goes on with its cut
            self._handed, self._handed_at = self._cut, self._counted
            self._cut = None

    def _on_said(self, said: _Said, start: int) -> None:
        if self._cut is None:
            handed = self._handed is not None and self._counted - self._handed_at <= NEW_GAP
            if handed and self._handed is not None:
                self._cut = self._handed
            else:
                self._cut, self._first_said = start, said.first
            self._handed = None
            self._recent.clear()
        self._recent.append(False)

    def _forget(self, count: int) -> None:
        """Drop the lines last said more than LOOK_BACK counted lines ago (asked when twice as
        many are kept: at most LOOK_BACK lines go at a time, so it costs O(1) a line)."""
        self._said = {
            line: said for line, said in self._said.items() if count - said.count < LOOK_BACK
        }

    def _phrase(self, line: str) -> bool:
        """Whether a line is a phrase of words a pool could be made of (no formula)."""
        return (
            len(line) <= self._phrase_chars
            and text_width(line) <= self._phrase_chars
            and not notation(line)
        )

    def _enter(self, line: str, moved: bool | None) -> None:
        """Add a counted line to the window, and keep its tallies (asked at every line)."""
        window = self._window
        window.append((line, moved))
        if moved is not None:
            self._window_said += 1
            self._window_moved += moved
        if len(window) > WINDOW:
            _, gone = window.popleft()
            if gone is not None:
                self._window_said -= 1
                self._window_moved -= gone

    def _judge(self, end: int) -> Hit | None:
        window = self._window
        if len(window) < WINDOW or self._window_said < REPRISE_LINES:
            return None
        said = [line for line, moved in window if moved is not None]
        if MOVED_PER * self._window_moved < self._window_said:
            # in its own order: a chorus or a letter, unless its lines are formulas or code (a
            # derivation said again and again, its connector or its last line changing; a
            # tool call written out again with its answer)
            formal = sum(1 for line in said if _formal(line))
            if FORMULAS_OF * formal < FORMULAS_IN * len(said):
                return None
        thrice = [line for line in said if self._said[line].times >= 3]
        if THRICE_OF * len(thrice) < THRICE_IN * WINDOW:
            return None
        distinct = set(said)
        if len(set(thrice)) < MIN_THRICE or len({_words(line) for line in distinct}) < MIN_SHAPES:
            return None
        cut = self._cut if self._cut is not None else end
        most = max(thrice, key=lambda line: self._said[line].times)
        return Hit(
            rule="reprise",
            channel=self._channel,
            prune_offset=cut,
            loop_start=min(self._first_said, cut),
            fired_at=end,
            repeats=float(self._said[most].times),
            period=None,
            evidence=excerpt(most),
            # (nothing was held: the channel counts what went out past the cut as lead-in)
        )
