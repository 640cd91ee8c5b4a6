"""Rule ``refenced``: the same code fence written a third time, little else between.

What it catches. An agent that runs a command, gets an error and runs it again, writing each
time the same error output in a fence with a remark between (``The build still fails.
Running it again.``); a model that writes its function again and again, each copy in a fence
of its own with a sentence between, now and then a version with a name changed or a comment
dropped among the copies. The remarks change, so no exact period comes, and fenced code needs
three times the copies of prose before the periodic rules cut it.

Why that is a loop. The same code or output, word for word, three times with hardly anything
new between: nothing comes but the fence and its near-copies.

What is not a loop. A fence counts when it holds ``MIN_LINES`` lines or more that are not blank
(a one-line command or call quoted again and again is how a plan names what it will edit). A
one-line fence counts only in a run of one-line fences with nothing but remarks between, and
only from the ``ONE_LINE_TIMES``-th copy on, once ``ONE_LINE_STALE`` copies came after
nothing new (a remark said before, or none): an agent that runs ``npm run build`` again and
again, a remark between (``让我再检查一下文件。``), never reading what it printed. A plan that
quotes one call at each place it will edit says something new over each.
Copies count within one run of fences: each fence of a run shares at least ``NEAR`` of the
shorter one's lines with the fence before it, and comes soon after it: at most ``MAX_REMARK``
new sentences of prose and ``MAX_GAP`` chars between, a remark and the command run again. A
sentence said before (``Let me write the final code:`` once more) is nothing new, and the
remarks a loop goes on to repeat are new the first time: before the second fence of a run or
copy, only the chars count. An answer
that shows one snippet again in each section says more than a remark between; another fence
between (the file edited, then the build run again) ends the run. Fences that differ in a
line are other fences: a function fixed from one copy to the next never comes back word for
word.

A copy may also differ in its comments, reworded on the lines they were on, and in up to
``RENAMED`` names, each written the same other way wherever it changes (``for part in parts``,
then ``for chunk in parts``), in a fence of ``RENAMED_LINES`` code lines or more: the same
code again, said other ways. A function or a type renamed is another version of its API, a
word changed inside a string is another value (``"acme-logs-dev"``, then
``"acme-logs-staging"``: the next environment's resources, written out as asked), and a
comment added is a line more.

Where it cuts. After the run's first fence, at its closing fence line: the first run's output
or the first version of the code is kept, and the copies after it are the loop.

It holds nothing back: a fence is known only once it is written. What the other rules'
watermark let out past the cut is the hit's lead-in (the channel counts it).

How it stays incremental. Each line inside a fence is read once and kept (spacing folded), up
to ``MAX_CHARS`` chars in all; the fences of the last stretch are kept by their text, at most
``MAX_FENCES`` of them, and the latest sentences, at most ``MAX_HEARD``. The open fence's text
is joined and looked up only when its length is one a kept fence has: joined at every line,
a long fence would cost the square of its length. Two fences are compared once, by their
sets of lines. A fence's code is read into tokens only when a kept fence has as many lines:
the open fence's once it has as many as one copied twice, a closed fence's when one of its
line count is kept (each kept fence's once, when first compared).
"""

from __future__ import annotations

import re
from typing import Final

from looprescue.detect import tally
from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CLAUSES, CODE_LINE, Rule
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({CODE_LINE, CLAUSES})

# A fence written this many times, one copy soon after the other, is a loop.
THIRD_TIME: Final = 3
# A fence counts from this many lines that are not blank.
MIN_LINES: Final = 2
# A one-line fence written this many times in a row, only remarks between, is a loop once
# ONE_LINE_STALE of them came after nothing new (a remark said before, or none).
ONE_LINE_TIMES: Final = 5
ONE_LINE_STALE: Final = 2
# A fence comes soon after the one before it: at most MAX_REMARK new sentences of prose and
# MAX_GAP chars between (a remark and the command run again), while a section that shows a
# snippet again says more first.
MAX_REMARK: Final = 2
MAX_GAP: Final = 400
# A fence is a near-copy of the one before when it shares this share of the shorter one's
# lines (a version with a name changed, a comment added or a line fixed).
NEAR: Final = 0.5
# Sentences remembered to tell a new one from one said again.
MAX_HEARD: Final = 256
# A fence longer than this is not followed (a file, not a remark's output).
MAX_CHARS: Final = 8000
# The fences kept by their text: the oldest go first past this many.
MAX_FENCES: Final = 64
# A copy may differ from the fence it copies in its comments and in up to RENAMED names, the
# same everywhere (``part`` written ``chunk`` on every line), in a fence of RENAMED_LINES lines
# or more (fewer are a few commands, whose words are all names).
RENAMED: Final = 2
RENAMED_LINES: Final = 6
# A line's tokens: a name, or any other char that is not space.
_TOKEN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[^\sA-Za-z_]")
# The words that define the name after them: renamed, it is another version of an API.
_DEFINES: Final = frozenset(
    {"def", "class", "function", "func", "fn", "struct", "interface", "enum", "trait", "type"}
)
_A_COMMENT: Final = ("#",)
# The marks a string literal opens and closes with.
_QUOTES: Final = frozenset({'"', "'", "`"})
# A comment to the line's end: ``# ...`` (a space after it: ``#include`` is code), ``// ...``.
_COMMENT: Final = re.compile(r"(?:^|(?<=\s))(?:#(?=\s|$)|//).*$")


class _Fence:
    """A fence's text seen before: its copies so far, where the first one began and where its
    closing line ended, where and after how many new sentences the latest copy ended, and the
    run it was last seen in."""

    __slots__ = ("copies", "first_end", "last_end", "run", "said", "start")

    def __init__(self, start: int, end: int, said: int, run: int) -> None:
        self.copies = 1
        self.start = start
        self.first_end = end
        self.last_end = end
        self.said = said
        self.run = run


class _Code(_Fence):
    """A fence's code seen before, and its copies so far that differ from it in comments and
    a name or two at most. Its lines are read into tokens when a fence of as many lines is
    first compared with it (most fences never are)."""

    __slots__ = ("_tokens", "lines")

    def __init__(self, lines: list[str], start: int, end: int, said: int, run: int) -> None:
        super().__init__(start, end, said, run)
        self.lines = lines
        self._tokens: list[tuple[str, ...]] | None = None

    def tokens(self) -> list[tuple[str, ...]]:
        if self._tokens is None:
            self._tokens = [_tokens(line) for line in self.lines]
        return self._tokens


def _tokens(line: str) -> tuple[str, ...]:
    """A code line's tokens, its comment left out; a comment alone is one token, ``#``: a
    comment reworded is the same line, a comment added is one more."""
    if "#" in line or "//" in line:
        line = _COMMENT.sub("", line)
        if not line.strip():
            return _A_COMMENT
    return tuple(_TOKEN.findall(line))


def _alike(a: list[tuple[str, ...]], b: list[tuple[str, ...]]) -> bool:
    """Whether two fences' code (their lines' tokens, comments left out) is the same but for
    up to ``RENAMED`` names, each written the same other way wherever it differs."""
    if len(a) != len(b):
        return False
    names: dict[str, str] = {}
    taken: set[str] = set()
    for one, other in zip(a, b, strict=True):
        if one == other:
            continue
        if len(one) != len(other):
            return False
        quoted = False  # inside a string literal
        for i, (x, y) in enumerate(zip(one, other, strict=True)):
            if x == y:
                if x in _QUOTES:
                    quoted = not quoted
                continue
            if quoted or not _is_name(x) or not _is_name(y):
                # (a changed value, in a string or not, an operator or a call: other code;
                # ``"acme-logs-dev"`` then ``"acme-logs-staging"`` is another environment's)
                return False
            if i and one[i - 1] in _DEFINES:
                return False  # (a function or a type renamed: another version of its API)
            known = names.get(x)
            if known is None:
                if y in taken or len(names) >= RENAMED:
                    return False
                names[x] = y
                taken.add(y)
            elif known != y:
                return False
    return not names or len(a) >= RENAMED_LINES


def _mostly_same(kept: list[str], lines: list[str]) -> bool:
    """Whether two fences have as many lines, at least half of them the same text: a copy
    with a name or its comments changed keeps most lines as they were (the cheap look before
    their tokens are compared)."""
    if len(kept) != len(lines):
        return False
    return 2 * sum(a == b for a, b in zip(kept, lines, strict=True)) >= len(lines)


def _is_name(token: str) -> bool:
    return token[0].isalpha() or token[0] == "_"


class RefencedRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("refenced",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._text: list[str] = []  # the open fence's lines so far, spacing folded
        self._chars = 0  # their chars, each line's break counted
        self._lines = 0  # its lines that are not blank (-1: too long to follow)
        self._start = 0  # where its first line begins
        self._seen: dict[str, _Fence] = {}
        self._lengths: dict[int, int] = {}  # how many kept fences have each length
        self._said = 0  # new sentences of prose so far
        self._heard: dict[str, None] = {}  # the latest sentences, to tell a new one
        # The run: fences one soon after the other, each a near-copy of the one before.
        self._run = 0  # its number
        self._run_fences = 0  # its fences so far
        self._run_start = 0  # where its first fence's first line begins
        self._run_first_end = -1  # where its first fence's closing line ends (-1: none yet)
        self._last_lines: frozenset[str] = frozenset()  # the latest fence's lines
        self._last_end = 0  # where the latest fence's closing line ended
        self._last_said = 0  # the new sentences said before it ended
        # The fences' code kept to tell a copy with a name or two changed, and the line
        # counts of those copied twice already.
        self._codes: list[_Code] = []
        self._twice: dict[int, int] = {}
        # The run of one-line fences: its line, its copies, where its first copy began and
        # its closing line ended, where the latest closing line ended and the new sentences
        # said by then, and the fences closed by then (a longer fence between ends the run).
        self._one = ""
        self._one_copies = 0
        self._one_start = 0
        self._one_first_end = 0
        self._one_end = 0
        self._one_said = 0
        self._one_stale = 0  # copies that came after no new sentence
        self._one_at = 0
        self._fences = 0  # fences closed so far

    def on_clauses(self, sentence: str, start: int, end: int) -> Hit | None:
        """A sentence of prose: what comes new between two fences is counted (a remark said
        before, ``Let me write the final code:``, says nothing new)."""
        if self._run_first_end < 0 and not self._one_copies:
            return None  # no fence yet: nothing to count between (most text)
        heard = self._heard
        if sentence in heard:
            return None
        if len(heard) >= MAX_HEARD:
            del heard[next(iter(heard))]
        heard[sentence] = None
        self._said += 1
        return None

    def on_code_line(self, line: str, start: int, end: int) -> Hit | None:
        """A complete line inside a fence (``line`` stripped)."""
        if not line or self._lines < 0:
            return None
        if not self._lines:
            self._start = start
        folded = " ".join(line.split()) + "\n"
        self._text.append(folded)
        self._chars += len(folded)
        self._lines += 1
        if self._chars > MAX_CHARS:
            self._lines = -1
            return None
        if self._lines == 1 and self._one_copies >= ONE_LINE_TIMES - 1:
            hit = self._one_line_again(folded, end)
            if hit is not None:
                return hit
        if self._lines in self._twice:
            hit = self._renamed_third(end)
            if hit is not None:
                return hit
        if self._lines < MIN_LINES or self._chars not in self._lengths:
            return None  # (no kept fence is as long: most lines)
        text = "".join(self._text)
        fence = self._seen.get(text)
        if fence is None or fence.copies < THIRD_TIME - 1:
            return None
        # as long as a fence written twice: the third copy, whatever line comes next
        return self._third(fence, text, end)

    def _third(self, fence: _Fence, text: str, end: int) -> Hit | None:
        """The open fence as the third copy of ``fence``, when it comes soon after the last
        one (or in their run): cut after the first copy, or after the run's first fence when a
        near-copy began the run."""
        in_run = fence.run == self._run and self._soon_after(self._last_end, self._last_said, False)
        if not (in_run or self._soon_after(fence.last_end, fence.said, False)):
            return None
        self._lines = -1
        start, first_end = fence.start, fence.first_end
        if in_run and self._run_first_end < first_end:
            # a near-copy began the run: it is the version kept
            start, first_end = self._run_start, self._run_first_end
        return Hit(
            rule="refenced",
            channel=self._channel,
            prune_offset=first_end,
            loop_start=start,
            fired_at=end,
            repeats=float(THIRD_TIME),
            period=None,
            evidence=excerpt(text.replace("\n", " / ")),
        )

    def _one_line_again(self, line: str, end: int) -> Hit | None:
        """The open fence's first line as the ``ONE_LINE_TIMES``-th copy of the run of
        one-line fences, when it says their line and comes soon after the last."""
        if (
            line != self._one
            or self._fences != self._one_at
            or not self._soon_after(self._one_end, self._one_said, False)
            or self._one_stale + (self._said == self._one_said) < ONE_LINE_STALE
        ):
            return None
        self._lines = -1
        return Hit(
            rule="refenced",
            channel=self._channel,
            prune_offset=self._one_first_end,
            loop_start=self._one_start,
            fired_at=end,
            repeats=float(ONE_LINE_TIMES),
            period=None,
            evidence=excerpt(line.strip()),
        )

    def _renamed_third(self, end: int) -> Hit | None:
        """The open fence's code, once it has as many lines as a fence's code copied twice
        (a name or two changed at most): the third copy, when it comes soon after the last."""
        lines = self._text
        code: list[tuple[str, ...]] | None = None
        for kept in reversed(self._codes):
            if kept.copies < THIRD_TIME - 1 or not _mostly_same(kept.lines, lines):
                continue
            if code is None:
                code = [_tokens(line) for line in lines]
            if not _alike(kept.tokens(), code):
                continue
            hit = self._third(kept, "".join(lines), end)
            if hit is not None:
                return hit
        return None

    def end_fence(self, end: int) -> None:
        """A fence line that ends at ``end``: it closes the fence when lines came since the
        last one (an opening line, or an empty fence's closing one, resets the text)."""
        text, lines = "".join(self._text), self._lines
        code = self._text
        self._text, self._chars, self._lines = [], 0, 0
        if lines == 1:
            self._one_line_closed(text, end)
            return
        if lines < MIN_LINES:
            return
        self._fences += 1
        held = frozenset(text.split("\n"))
        in_run = (
            self._run_first_end >= 0
            and self._soon_after(self._last_end, self._last_said, self._run_fences == 1)
            and _near(self._last_lines, held)
        )
        if in_run:
            self._run_fences += 1
        else:  # a fence of its own: a run begins here
            self._run += 1
            self._run_fences = 1
            self._run_start, self._run_first_end = self._start, end
        self._last_lines, self._last_end, self._last_said = held, end, self._said
        self._keep_code(code, end)
        fence = self._seen.get(text)
        if fence is None:
            if len(self._seen) >= MAX_FENCES:
                oldest = next(iter(self._seen))
                del self._seen[oldest]
                tally.drop(self._lengths, len(oldest))
            self._seen[text] = _Fence(self._start, end, self._said, self._run)
            tally.add(self._lengths, len(text))
            return
        self._count(fence, end)

    def _one_line_closed(self, text: str, end: int) -> None:
        """A one-line fence closed at ``end``: one more copy of the run of one-line fences
        when it says their line right after the last (only remarks between), else a run of
        its own begins."""
        if (
            text == self._one
            and self._fences == self._one_at
            and self._soon_after(self._one_end, self._one_said, self._one_copies == 1)
        ):
            self._one_copies += 1
            if self._said == self._one_said:
                self._one_stale += 1
        else:
            self._one, self._one_copies = text, 1
            self._one_start, self._one_first_end = self._start, end
            self._one_stale = 0
        self._one_end, self._one_said = end, self._said
        self._fences += 1
        self._one_at = self._fences

    def _keep_code(self, code: list[str], end: int) -> None:
        """Count a closed fence's code (its lines) as a copy of the latest kept one it is alike
        to (soon after that one's last copy), or keep it as new."""
        tokens: list[tuple[str, ...]] | None = None
        for kept in reversed(self._codes):
            if not _mostly_same(kept.lines, code):
                continue  # (the cheap look: most kept fences have other lines)
            if tokens is None:
                tokens = [_tokens(line) for line in code]
            if not _alike(kept.tokens(), tokens):
                continue
            was_twice = kept.copies >= THIRD_TIME - 1
            self._count(kept, end)
            if was_twice != (kept.copies >= THIRD_TIME - 1):
                if was_twice:
                    tally.drop(self._twice, len(kept.lines))
                else:
                    tally.add(self._twice, len(kept.lines))
            return
        if len(self._codes) >= MAX_FENCES:
            gone = self._codes.pop(0)
            if gone.copies >= THIRD_TIME - 1:
                tally.drop(self._twice, len(gone.lines))
        self._codes.append(_Code(code, self._start, end, self._said, self._run))

    def _count(self, fence: _Fence, end: int) -> None:
        """The closed fence, ending at ``end``, is one more copy of ``fence``: in its run or
        soon after its last copy, or else the first of its copies counted again."""
        second = fence.copies == 1
        if fence.run == self._run or self._soon_after(fence.last_end, fence.said, second):
            fence.copies += 1
        else:
            fence.copies = 1  # too much between: its copies count again from here
            fence.start, fence.first_end = self._start, end
        fence.last_end, fence.said, fence.run = end, self._said, self._run

    def _soon_after(self, end: int, said: int, second: bool) -> bool:
        """Whether the open fence comes soon after a fence that ended at ``end`` when ``said``
        new sentences had been said. The ``second`` fence of a run or copy may come after
        more new sentences: the remarks a loop goes on to repeat are new the first time."""
        if self._start - end > MAX_GAP:
            return False
        return second or self._said - said <= MAX_REMARK


def _near(one: frozenset[str], other: frozenset[str]) -> bool:
    """Whether two fences hold mostly the same lines: at least NEAR of the shorter one's."""
    return len(one & other) >= NEAR * min(len(one), len(other))
