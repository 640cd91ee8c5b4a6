"""Rule ``imports``: inside a code fence, import lines that keep coming back.

A program imports a module once. A model that loops inside code often does it in its import
block: ``import java.util.ArraySet;``, ``…ListRef;``, ``…Set;`` and round again, a handful of
lines reshuffled, which no exact period catches until (if ever) it settles. Two files shown in
one fence may share imports, so a line seen twice proves nothing; but no program writes the
same import a third time. So among the consecutive import lines of one fence (blank lines
aside), once ``REPEATED_LINES`` of them repeat earlier ones and one has come ``THIRD_TIME``
times, it is a loop.

Prune point: where the batch of repeated imports first appeared (``streak.UnitRun``, as the
pool rule finds it), so none of the looping lines is kept. A line of code that is no import
ends the run, and so does the fence.
"""

from __future__ import annotations

import re
from typing import Final

from looprescue.detect.buffer import TextWindow
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.limits import ONSET_COVERAGE, REPEAT_WITHIN
from looprescue.detect.rule import CODE_LINE, WATERMARK, Rule
from looprescue.detect.segment import Segmenter
from looprescue.detect.streak import UnitRun
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({CODE_LINE, WATERMARK})

# Import lines of the common languages: Java/Kotlin/Scala/Go/Python/JS/TS ``import``, Python
# ``from x import y``, C/C++ ``#include``, C# ``using X;``, Rust/PHP ``use``, ``require(...)``.
_IMPORT: Final = re.compile(
    r"(?:import\s+\S|from\s+[\w.]+\s+import\s|#\s*include\s*[<\"]|using\s+[\w.]+\s*;"
    r"|use\s+[\w:\\]+|(?:const|let|var)\s+\w+\s*=\s*require\s*\()"
)
_KEYWORDS: Final = (
    "import",
    "from",
    "#include",
    "# include",
    "using",
    "use",
    "const",
    "let",
    "var",
)
REPEATED_LINES: Final = 4
THIRD_TIME: Final = 3
# Import lines a run keeps for finding its onset, and the most distinct ones a batch has.
HORIZON: Final = 64
MAX_MEMBERS: Final = 12
# An unfinished line longer than this is no import line of a loop (held no longer).
LONGEST_IMPORT: Final = 200


def is_import(line: str) -> bool:
    """Whether a stripped line of code is an import line."""
    return _IMPORT.match(line) is not None


class ImportsRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("imports",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._counts: dict[str, int] = {}  # import lines of the current run
        self._repeated = 0  # lines of the run that repeat an earlier one
        self._run = UnitRun(ONSET_COVERAGE, MAX_MEMBERS, HORIZON, REPEAT_WITHIN)
        self._free_line = -1  # start of an unfinished line that can no longer be an import

    def on_code_line(self, line: str, start: int, end: int) -> Hit | None:
        """A complete line inside a fence (``line`` stripped)."""
        if not line:
            return None  # a blank line goes with the imports around it
        if not is_import(line):
            self._end_run()
            return None
        key = " ".join(line.split())
        seen = self._counts.get(key, 0) + 1
        self._counts[key] = seen
        if seen > 1:
            self._repeated += 1
        self._run.add(key, start)
        if self._repeated >= REPEATED_LINES and seen >= THIRD_TIME:
            members = {k for k, n in self._counts.items() if n >= 2}
            onset = self._run.onset(members)
            if onset is not None:
                return self._hit(onset, end, members)
        return None

    def end_fence(self, end: int) -> None:
        self._end_run()

    def _end_run(self) -> None:
        """The run of import lines is over (a fence line, or code that imports nothing)."""
        if self._counts:
            self._counts.clear()
            self._repeated = 0
            self._run.add(None, 0, barrier=True)

    def _hit(self, onset: int, end: int, members: set[str]) -> Hit:
        lines = sorted(members, key=lambda k: (-self._counts[k], k))
        return Hit(
            rule="imports",
            channel=self._channel,
            prune_offset=onset,
            loop_start=onset,
            fired_at=end,
            repeats=round(self._repeated / max(1, len(members)), 2),
            period=None,
            evidence=excerpt(" / ".join(lines[:6])),
        )

    def safe_offset(self, win: TextWindow, segmenter: Segmenter) -> int:
        """Earliest offset a future imports hit could prune: the run of import lines that could
        still be a batch, and an unfinished fenced line that may turn out one."""
        line_start, end, in_fence = segmenter.line_from, win.end, segmenter.in_fence
        held = self._run.hold_from()
        if held is not None:
            return held
        if not in_fence or line_start == self._free_line:
            return end
        tail = win.slice(line_start, end)
        head = tail.lstrip()
        if not head:
            return end
        # every import line begins with a keyword: a line that neither begins with one nor
        # could still grow into one never becomes an import
        if len(head) <= LONGEST_IMPORT and any(
            head.startswith(k) or k.startswith(head) for k in _KEYWORDS
        ):
            return line_start + len(tail) - len(head)
        self._free_line = line_start  # a line only grows: it can be no import now
        return end
