"""Rule ``redefined``: inside one code fence, the same definition written a third time.

What it catches. A model that loops while writing code often writes one function again and
again: ``def get_db():`` with its three lines, a comment, ``def get_db():`` once more, now and
then another function between the copies. The comments and the functions between change, so no
exact period comes; the copies are code, so the prose rules leave them.

Why that is a loop. A program defines a name once in a scope. Two files shown in one fence
may both hold a helper, so a second copy proves little; a third copy of the same definition,
word for word, under the same class, is never how code is written.

What is not a loop. A definition is a header line (``def``, ``function``, ``func``, ``fn``, a
Java or C# method, a JavaScript arrow function bound to a name) and the lines after it up to a
blank line, the next header, a line as far left as the header (a closing brace or ``end`` there
is its last line) or the end of the fence: its first paragraph. Copies are compared
line by line, spacing aside, and only in the same place: under the same enclosing headers
(a ``class``, ``struct``, ``impl``, ``interface`` ... or a function, by indentation):
``__init__`` written alike in three classes is three definitions, and so is an ``inner``
helper written alike inside three functions. A fence is judged alone: the same file shown
again in a later fence, its functions unchanged, is a new version of the file, not a loop.

Where it cuts. After the first copy (its last line): the definition is kept once, and the
copies after it go with whatever came between them.

It holds nothing back: a definition is known only once its paragraph ends. What the other
rules' watermark let out past the cut is the hit's lead-in (the channel counts it).

How it stays incremental. Each line inside a fence is read once. The fence's definitions are
kept in a dict by their text, at most ``MAX_DEFINITIONS`` of them, each at most
``MAX_LINES`` lines (a longer paragraph is no longer followed).
"""

from __future__ import annotations

import re
from typing import Final

from looprescue.detect.hits import Channel, Hit
from looprescue.detect.rule import CODE_LINE, Rule
from looprescue.detect.text import excerpt

_FEEDS: Final = frozenset({CODE_LINE})

# A copy of one definition is this many: the third one is a loop.
THIRD_TIME: Final = 3
# A definition's first paragraph is followed up to this many lines.
MAX_LINES: Final = 40
# The definitions of one fence kept: the oldest go first past this many.
MAX_DEFINITIONS: Final = 256

# A line that defines a function or method by name.
_HEADER: Final = re.compile(
    r"""(?x)
    (?: export \s+ (?: default \s+ )? )? (?: async \s+ )?
    (?: def | function \*? | func | fn | sub ) \s+ [\w$.*()\s]*? [\w$]+ \s* [(<\[]
    | pub (?: \( \w+ \) )? \s+ (?: async \s+ | const \s+ | unsafe \s+ )* fn \s
    | (?: (?: public | private | protected | internal | static | final | override | virtual
            | abstract | synchronized | async ) \s+ )+ [\w<>\[\],.?]+ \s+ \w+ \s* \(
    | (?: export \s+ )? (?: const | let | var ) \s+ [\w$]+ \s* = \s* (?: async \s+ )?
      (?: function \b | \( [^)]* \) \s* => | [\w$]+ \s* => )
    """
)
# A line that opens a type: the definitions under it are its own.
_SCOPE: Final = re.compile(
    r"""(?x)
    (?: export \s+ | pub \s+ | public \s+ | private \s+ | abstract \s+ | final \s+ | data \s+
      | sealed \s+ | open \s+ )*
    (?: class | struct | impl | trait | interface | object | module | namespace | enum
      | extension | protocol ) \b
    """
)

# The words a header or a type's line may open with (each pattern above is matched at a line's
# start, its first word whole): a line that opens with none of them is neither, and most code
# lines are told so without trying the patterns.
_OPENING_WORDS: Final = frozenset(
    {
        *("export", "async", "def", "function", "func", "fn", "sub", "pub", "public"),
        *("private", "protected", "internal", "static", "final", "override", "virtual"),
        *("abstract", "synchronized", "const", "let", "var", "data", "sealed", "open"),
        *("class", "struct", "impl", "trait", "interface", "object", "module", "namespace"),
        *("enum", "extension", "protocol"),
    }
)
_FIRST_WORD: Final = re.compile(r"[a-z]+")


# The last line of a definition in a language of braces or of ``end``.
_CLOSER: Final = re.compile(r"[})\]]|end\b")


def is_definition(line: str) -> bool:
    """Whether a stripped line of code opens a named function or method."""
    return _may_open(line) and _HEADER.match(line) is not None


def _may_open(line: str) -> bool:
    """Whether a stripped line opens with a word a header or a type's line opens with."""
    word = _FIRST_WORD.match(line)
    return word is not None and word.group() in _OPENING_WORDS


class RedefinedRule(Rule):
    def names(self) -> tuple[str, ...]:
        return ("redefined",)

    def feeds(self) -> frozenset[str]:
        return _FEEDS

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._line_from = -1  # where the next line of the fence begins (-1: not known)
        # the headers open around the line being read, outermost first: indentation, header
        self._open: list[tuple[int, str]] = []
        # the definitions of this fence, by their text: how often written, and where the
        # first copy begins and ends
        self._seen: dict[str, tuple[int, int, int]] = {}
        self._key = ""  # the definition being written: where it is, and its lines so far
        self._lines = 0  # its lines (0: none being written)
        self._indent = 0  # its header's indentation
        self._start = 0  # where it begins
        self._end = 0  # where its last line ends

    def on_code_line(self, line: str, start: int, end: int) -> Hit | None:
        """A complete line inside a fence (``line`` stripped; ``start``: its first char that
        is not a space, ``end``: the start of the next line)."""
        # (the first line of a fence is taken to be at the left edge)
        indent = start - self._line_from if self._line_from >= 0 else 0
        self._line_from = end
        if not line:
            self._close()
            return None
        opened = self._open
        while opened and opened[-1][0] >= indent:
            opened.pop()  # (a line as far left as a header is past its body)
        closing = False
        if self._lines and indent <= self._indent:
            # a line as far left as the header ends the definition: a closing brace or
            # ``end`` as its last line, anything else after it
            closing = indent == self._indent and _CLOSER.match(line) is not None
            if not closing:
                self._close()
        opens = not closing and _may_open(line)
        header = opens and _HEADER.match(line) is not None
        if header or (opens and _SCOPE.match(line) is not None):
            self._close()
            where = "\n".join(outer for _, outer in opened)
            folded = " ".join(line.split())
            opened.append((indent, folded))
            if not header:
                return None  # a type: the definitions under it are its own
            self._key, self._lines = where + "\0" + folded, 1
            self._indent, self._start = indent, start
        elif self._lines:
            if self._lines >= MAX_LINES:
                self._lines = 0  # too long to follow: no definition of a loop
                return None
            self._key += "\n" + " ".join(line.split())
            self._lines += 1
        else:
            return None
        self._end = end
        seen = self._seen.get(self._key)
        if seen is None or seen[0] < THIRD_TIME - 1:
            if closing:
                self._close()
            return None
        # the third copy is as long as the two before it: the same definition again
        _, first, first_end = seen
        self._lines = 0
        header_line = self._key.split("\0", 1)[1]
        return Hit(
            rule="redefined",
            channel=self._channel,
            prune_offset=first_end,
            loop_start=first,
            fired_at=end,
            repeats=float(THIRD_TIME),
            period=None,
            evidence=excerpt(header_line.replace("\n", " / ")),
        )

    def _close(self) -> None:
        """The definition being written is complete: count it."""
        if not self._lines:
            return
        self._lines = 0
        seen = self._seen.get(self._key)
        if seen is None:
            if len(self._seen) >= MAX_DEFINITIONS:
                del self._seen[next(iter(self._seen))]
            self._seen[self._key] = (1, self._start, self._end)
        else:
            self._seen[self._key] = (seen[0] + 1, seen[1], seen[2])

    def end_fence(self, end: int) -> None:
        """A fence line: the next fence is judged alone."""
        self._line_from = -1
        self._lines = 0
        self._open.clear()
        self._seen.clear()
