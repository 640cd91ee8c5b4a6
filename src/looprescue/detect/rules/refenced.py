"""Rule ``refenced``: the same code fence written a third time, little else between.

What it catches. An agent that runs a command, gets an error and runs it again, writing each
time the same error output in a fence with a remark between (``The build still fails.
Running it again.``); a model that writes its function again and again, each copy in a fence
of its own with a sentence between. The remarks change, so no exact period comes, and fenced
code needs three times the copies of prose before the periodic rules cut it.

Why that is a loop. The same code or output, word for word, three times with hardly anything
new between: nothing comes but the fence.

What is not a loop. A fence counts when it holds ``MIN_LINES`` lines or more that are not blank
(a one-line command or call quoted again and again is how a plan names what it will edit). A
copy counts when it comes soon after the copy before it: at most ``MAX_REMARK`` sentences of
prose and ``MAX_GAP`` chars between, a remark and the command run again. An answer that shows
one snippet again in each section says more than a remark between. Fences that
differ in a line are other fences (a function fixed from one copy to the next).

Where it cuts. After the first copy's closing fence line: the first run's output or the first
version of the code is kept, and what comes after it is the loop.

It holds nothing back: a fence is known only once it is written. What the other rules'
watermark let out past the cut is the hit's lead-in (the channel counts it).

How it stays incremental. Each line inside a fence is read once and added to the fence's text
(spacing folded), up to ``MAX_CHARS``; the fences of the last stretch are kept by their text,
at most ``MAX_FENCES`` of them.
"""

from __future__ import annotations

from typing import Final

from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CLAUSES, CODE_LINE, Rule
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({CODE_LINE, CLAUSES})

# A fence written this many times, one copy soon after the other, is a loop.
THIRD_TIME: Final = 3
# A fence counts from this many lines that are not blank.
MIN_LINES: Final = 2
# A copy comes soon after the copy before it: at most MAX_REMARK sentences of prose and
# MAX_GAP chars between (a remark and the command run again), while a section that shows a
# snippet again says more first.
MAX_REMARK: Final = 2
MAX_GAP: Final = 400
# A fence longer than this is not followed (a file, not a remark's output).
MAX_CHARS: Final = 8000
# The fences kept by their text: the oldest go first past this many.
MAX_FENCES: Final = 64


class _Fence:
    """A fence's text seen before: its copies so far, where the first one began and where its
    closing line ended, and where and after how many sentences the latest copy ended."""

    __slots__ = ("copies", "first_end", "last_end", "said", "start")

    def __init__(self, start: int, end: int, said: int) -> None:
        self.copies = 1
        self.start = start
        self.first_end = end
        self.last_end = end
        self.said = said  # the sentences of prose said before the latest copy ended


class RefencedRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("refenced",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._text = ""  # the open fence's lines so far, spacing folded
        self._lines = 0  # its lines that are not blank (-1: too long to follow)
        self._start = 0  # where its first line begins
        self._seen: dict[str, _Fence] = {}
        self._said = 0  # sentences of prose so far

    def on_clauses(self, sentence: str, start: int, end: int) -> Hit | None:
        """A sentence of prose: what comes between two fences is counted."""
        self._said += 1
        return None

    def on_code_line(self, line: str, start: int, end: int) -> Hit | None:
        """A complete line inside a fence (``line`` stripped)."""
        if not line or self._lines < 0:
            return None
        if not self._lines:
            self._start = start
        self._text += " ".join(line.split()) + "\n"
        self._lines += 1
        if len(self._text) > MAX_CHARS:
            self._lines = -1
            return None
        fence = self._seen.get(self._text)
        if (
            fence is None
            or fence.copies < THIRD_TIME - 1
            or self._lines < MIN_LINES
            or not self._soon_after(fence)
        ):
            return None
        # as long as a fence written twice: the third copy, whatever line comes next
        self._lines = -1
        return Hit(
            rule="refenced",
            channel=self._channel,
            prune_offset=fence.first_end,
            loop_start=fence.start,
            fired_at=end,
            repeats=float(THIRD_TIME),
            period=None,
            evidence=excerpt(self._text.replace("\n", " / ")),
        )

    def end_fence(self, end: int) -> None:
        """A fence line that ends at ``end``: it closes the fence when lines came since the
        last one (an opening line, or an empty fence's closing one, resets the text)."""
        text, lines = self._text, self._lines
        self._text, self._lines = "", 0
        if lines < MIN_LINES:
            return
        fence = self._seen.get(text)
        if fence is None:
            if len(self._seen) >= MAX_FENCES:
                del self._seen[next(iter(self._seen))]
            self._seen[text] = _Fence(self._start, end, self._said)
            return
        if self._soon_after(fence):
            fence.copies += 1
        else:
            fence.copies = 1  # too much between: the run of copies begins again here
            fence.start, fence.first_end = self._start, end
        fence.last_end, fence.said = end, self._said

    def _soon_after(self, fence: _Fence) -> bool:
        """Whether the open fence comes soon after the latest copy of ``fence``."""
        return self._start - fence.last_end <= MAX_GAP and self._said - fence.said <= MAX_REMARK
