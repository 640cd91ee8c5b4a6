"""The bounded text window a channel keeps: the raw text and its folded twin.

The folded view is what periodicity is judged on: every number (a run of up to ``NUMBER_DIGITS``
digits; longer runs keep their further digits) becomes one ``0``. So ``Step 9: …`` and
``Step 10: …`` are the same copy (a counter loop stays periodic when its number grows a digit),
and a chant of digits with no separator is still a chant. An ordinal suffix goes the same way:
the two letters after a number fold to ``th`` when they could be one (``21st``, ``22nd`` and
``24th`` all read ``0th``), letter for letter and judged only on the chars before them, so the
fold never waits for text that has not come. Folded offsets map back to raw ones through the
list of runs that folding shortened (one entry per multi-digit number or whitespace run).

Whitespace after a sentence end is layout, not text: after ``.``, ``!`` or ``?`` a run of it
folds to one space, after ``。``, ``！`` or ``？`` (scripts written without spaces) to nothing. So
a sentence said again and again stays one period whether its copies are run together, spaced
or set as paragraphs (``递归函数是…。递归函数是…。\n\n递归函数是…。``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Final

from looprescue.detect.shape import CLAUSE_MARK_CHARS
from looprescue.detect.text import SENTENCE_END_CHARS

# Digits of one number; a longer digit run is not a number that counts up but digits repeated.
NUMBER_DIGITS: Final = 8
_NUMBERS: Final = re.compile(rf"(?<![0-9])[0-9]{{1,{NUMBER_DIGITS}}}")
_DIGIT_HEAD: Final = re.compile(r"[0-9]+")
_DIGIT_TAIL: Final = re.compile(r"[0-9]+$")
# An ordinal suffix, letter by letter: the first letter after a number, then the second.
_ORDINAL_FIRST: Final = frozenset("snrt")  # st, nd, rd, th
_ORDINAL_SECOND: Final = frozenset("tdh")
_ORDINAL: Final = re.compile(r"(?<=[0-9])[snrt][tdh]?")
# Sentence ends after which whitespace is layout: one space after a Latin one, none after a
# full-width one.
_LATIN_ENDS: Final = ".!?"
_WIDE_ENDS: Final = "。！？"
_SPACE_AFTER_END: Final = re.compile(f"(?<=[{_LATIN_ENDS}{_WIDE_ENDS}])\\s+")
# what ``_append_folded`` looks for: a number, or a sentence end and whitespace after it that
# folding changes (after a Latin end, anything but one space: most sentences end so). The
# pattern begins with one char class, which the regex engine scans for in a tight loop; an
# alternation of classes would be tried branch by branch at every char.
_FOLDABLE: Final = re.compile(
    f"[0-9{_LATIN_ENDS}{_WIDE_ENDS}]"
    f"(?:(?<=[0-9])[0-9]*|(?<=[{_LATIN_ENDS}])(?:[^\\S ]\\s*| \\s+)|(?<=[{_WIDE_ENDS}])\\s+)"
)
# How the text ends, for whitespace that the next piece may begin with.
_NO_END, _LATIN_END, _LATIN_SPACE, _WIDE_END = 0, 1, 2, 3


def fold(text: str) -> str:
    """The folded view of ``text``: every number to one ``0``, its ordinal suffix to ``th``,
    whitespace after a sentence end to one space (after a full-width end, to nothing)."""
    return _SPACE_AFTER_END.sub(_as_layout, _NUMBERS.sub("0", _ORDINAL.sub(_as_th, text)))


def _as_layout(match: re.Match[str]) -> str:
    return "" if match.string[match.start() - 1] in _WIDE_ENDS else " "


def _as_th(match: re.Match[str]) -> str:
    return "th"[: len(match.group())]


DIGIT_CHARS: Final = frozenset("0123456789")
# Chars that some per-delta step must look at: digits (folding), sentence ends (the segmenter)
# and clause marks (the stutter rule). Most deltas hold none, and ``last_mark`` lets each step
# tell so without a search of its own.
_MARK_SET: Final = DIGIT_CHARS | SENTENCE_END_CHARS | CLAUSE_MARK_CHARS
MARK_CHARS: Final = "".join(sorted(_MARK_SET))
_LAST_MARK: Final = re.compile(f"(?s).*[{re.escape(MARK_CHARS)}]")


def _ordinal_letters(piece: str, at: int, most: int) -> int:
    """How many letters of an ordinal suffix begin at ``piece[at]`` (up to ``most``; with
    ``most`` 1, only the second letter is looked for)."""
    if most == 1:
        return 1 if piece[at : at + 1] in _ORDINAL_SECOND and at < len(piece) else 0
    if at >= len(piece) or piece[at] not in _ORDINAL_FIRST:
        return 0
    return 2 if at + 1 < len(piece) and piece[at + 1] in _ORDINAL_SECOND else 1


class TextWindow:
    """The text of a channel from ``keep`` chars before the last checkpoint on.

    Deltas are only collected in ``pending`` (the channel appends to it directly: that is the
    per-delta hot path); ``sync`` joins them when a rule needs the text. Trimming happens in
    blocks, so the copy it costs is paid once per ``slack`` chars: amortized O(1) per char,
    and memory stays bounded.
    """

    __slots__ = (
        "_end_ph",
        "_end_start",
        "_end_state",
        "_lines",
        "_lines_at",
        "_run_len",
        "_run_ph",
        "_run_start",
        "_suffix",
        "_unbroken",
        "base",
        "end",
        "fbase",
        "fend",
        "folded",
        "keep",
        "last_mark",
        "pending",
        "raw",
        "run_fph",
        "run_rend",
        "run_rstart",
        "slack",
        "synced",
    )

    def __init__(self, keep: int, slack: int = 2048) -> None:
        self.keep = keep
        self.slack = slack
        self.raw = ""
        self.base = 0  # absolute offset of raw[0]
        self.end = 0  # absolute offset after the last char received
        self.synced = 0  # absolute offset up to which ``raw`` and ``folded`` are built
        self.last_mark = -1  # absolute offset of the last mark char (``MARK_CHARS``) synced
        self.pending: list[str] = []  # deltas received but not joined yet
        self.folded = ""
        self.fbase = 0  # absolute folded offset of folded[0]
        self.fend = 0  # absolute folded offset after the last folded char
        # Runs that folding shortened: folded offset of their placeholder, raw span.
        self.run_fph: list[int] = []
        self.run_rstart: list[int] = []
        self.run_rend: list[int] = []
        # The number the text ends in, if any (it may go on in the next delta).
        self._run_start = 0
        self._run_ph = 0
        self._run_len = 0
        # How far into a possible ordinal suffix the text ends: 1 just after a number, 2 after
        # its first suffix letter, else 0.
        self._suffix = 0
        # Whether the text ends with a sentence end (and whitespace after it), which whitespace
        # at the start of the next piece goes on from: the run's placeholder and raw start.
        self._end_state = _NO_END
        self._end_ph = 0
        self._end_start = 0
        # The last ``ended_lines`` answer and what it was asked: the rules that read whole
        # lines ask the same at a checkpoint, one after the other.
        self._lines_at = (-1, -1, False)
        self._lines: list[tuple[str, int, int]] = []
        # A line start, and how far after it no line break was found: a long line is searched
        # once, not from its start at every checkpoint.
        self._unbroken = (-1, -1)

    # -- receiving ------------------------------------------------------------------------
    def sync(self) -> None:
        """Join the deltas received since the last call into the held text."""
        if not self.pending:
            return
        new = "".join(self.pending)
        self.pending.clear()
        if not new:
            return
        start = self.synced
        self.synced = start + len(new)
        if not _MARK_SET.isdisjoint(new):  # (a loop over the chars in C: no search to set up)
            mark = _LAST_MARK.match(new)
            if mark is not None:
                self.last_mark = start + mark.end() - 1
        # Drop the attribute's reference first so CPython can grow the string in place.
        raw, self.raw = self.raw, ""
        raw += new
        self.raw = raw
        skip = 0
        if self._run_len and "0" <= new[0] <= "9":
            # The trailing number goes on: its placeholder is already there.
            skip = _DIGIT_HEAD.match(new).end()  # type: ignore[union-attr]
            absorbed = min(skip, max(0, NUMBER_DIGITS - self._run_len))
            if absorbed:
                self._extend_run(self._run_start + self._run_len + absorbed)
            self._run_len += skip
            if absorbed < skip:  # digits past a number's length are kept as they are
                self._append_raw(new[absorbed:skip])
        if skip < len(new):
            self._append_folded(new[skip:], start + skip)

    def _extend_run(self, run_end: int) -> None:
        if self.run_rstart and self.run_rstart[-1] == self._run_start:
            self.run_rend[-1] = run_end
        else:
            self.run_fph.append(self._run_ph)
            self.run_rstart.append(self._run_start)
            self.run_rend.append(run_end)

    def _append_raw(self, digits: str) -> None:
        folded, self.folded = self.folded, ""
        folded += digits
        self.folded = folded
        self.fend += len(digits)
        self._suffix = 1

    def _append_folded(self, piece: str, raw_start: int) -> None:
        if (
            self.last_mark < raw_start
            and not self._suffix
            and not (self._end_state and piece[0].isspace())
        ):
            # No number or sentence end in it, and nothing before it that it goes on from:
            # folded as it is. Most pieces the watermark syncs (a delta or two) are such.
            folded, self.folded = self.folded, ""
            folded += piece
            self.folded = folded
            self.fend += len(piece)
            self._run_len = 0
            self._end_state = _NO_END
            return
        fstart = self.fend
        # One pass over the numbers and the whitespace after sentence ends builds the folded
        # piece and the shortened-run entries.
        parts: list[str] = []
        last = removed = 0
        fph, rstart, rend = self.run_fph, self.run_rstart, self.run_rend
        end_state = self._end_state
        if end_state and piece[0].isspace():
            # whitespace after the sentence end the text so far ends with
            size = len(piece) - len(piece.lstrip())
            if end_state == _LATIN_END:
                parts.append(" ")  # its first char is the run's placeholder
                self._end_ph, self._end_start = fstart, raw_start
                removed = size - 1
            else:
                removed = size
            if removed:
                if rstart and rstart[-1] == self._end_start:
                    rend[-1] = raw_start + size
                else:
                    fph.append(self._end_ph)
                    rstart.append(self._end_start)
                    rend.append(raw_start + size)
            last = size
            end_state = _LATIN_SPACE if end_state == _LATIN_END else end_state
        elif self._suffix:  # the piece may go on with the suffix of the number before it
            last = _ordinal_letters(piece, 0, 3 - self._suffix)
            if last:
                parts.append("th"[self._suffix - 1 : self._suffix - 1 + last])
        if last < len(piece):
            end_state = _NO_END
        for match in _FOLDABLE.finditer(piece, last):
            begin, end = match.span()
            if "0" <= piece[begin] <= "9":
                if last < begin:
                    parts.append(piece[last:begin])
                size = end - begin
                if size == 1:
                    parts.append("0")
                else:
                    cut = begin + min(size, NUMBER_DIGITS)
                    fph.append(fstart + begin - removed)
                    rstart.append(raw_start + begin)
                    rend.append(raw_start + cut)
                    removed += cut - begin - 1
                    # (digits past a number's length stay)
                    parts.append("0" if cut == end else "0" + piece[cut:end])
                last = end
                if piece[end : end + 1] in _ORDINAL_FIRST:  # rare: most numbers end a word
                    letters = _ordinal_letters(piece, end, 2)
                    parts.append("th"[:letters])
                    last = end + letters
                end_state = _NO_END
                continue
            # whitespace after a sentence end: one space after a Latin one (the placeholder),
            # none after a full-width one (the end itself is the placeholder); the end stays
            # as it is
            begin += 1
            parts.append(piece[last:begin])
            size = end - begin
            if piece[begin - 1] in _LATIN_ENDS:
                placeholder, start, dropped = fstart + begin - removed, raw_start + begin, size - 1
                parts.append(" ")
                end_state = _LATIN_SPACE
            else:
                placeholder = fstart + begin - 1 - removed
                start, dropped = raw_start + begin - 1, size
                end_state = _WIDE_END
            if dropped:
                fph.append(placeholder)
                rstart.append(start)
                rend.append(raw_start + end)
                removed += dropped
            self._end_ph, self._end_start = placeholder, start
            last = end
        if parts or last:
            parts.append(piece[last:])
            folded_piece = "".join(parts)
        else:
            folded_piece = piece
        folded, self.folded = self.folded, ""
        folded += folded_piece
        self.folded = folded
        self.fend = fstart + len(folded_piece)
        tail_char = piece[-1]
        if last < len(piece):
            # the piece ends after its last run: with a sentence end (and one space), or with
            # nothing to go on
            if tail_char in _LATIN_ENDS:
                end_state = _LATIN_END
            elif tail_char == " " and last < len(piece) - 1 and piece[-2] in _LATIN_ENDS:
                end_state = _LATIN_SPACE  # the space is the placeholder of what may follow
                self._end_ph, self._end_start = self.fend - 1, raw_start + len(piece) - 1
            elif tail_char in _WIDE_ENDS:
                end_state = _WIDE_END
                self._end_ph, self._end_start = self.fend - 1, raw_start + len(piece) - 1
            else:
                end_state = _NO_END
        self._end_state = end_state
        if "0" <= tail_char <= "9":
            size = len(_DIGIT_TAIL.search(piece).group())  # type: ignore[union-attr]
            self._run_start = raw_start + len(piece) - size
            self._run_len = size
            # the number's placeholder: the last folded char unless digits past it were kept
            self._run_ph = self.fend - 1 - max(0, size - NUMBER_DIGITS)
            self._suffix = 1
        else:
            self._run_len = 0
            tail = folded_piece[-2:]
            if (
                tail
                and tail[-1] == "t"
                and (tail[:-1] in DIGIT_CHARS if len(tail) == 2 else self._suffix == 1)
            ):
                self._suffix = 2  # ends in a suffix's first letter (already folded to "t")
            else:
                self._suffix = 0

    # -- forgetting -----------------------------------------------------------------------
    def trim(self, done: int) -> None:
        """Forget text more than ``keep`` chars behind ``done`` (the offset rules have reached).

        Rules never look further back than ``keep`` from the checkpoint they run at, so what
        they see does not depend on when trimming happened (i.e. on the chunking)."""
        excess = done - self.keep - self.base
        if excess <= self.slack:
            return
        new_base = self.base + excess
        new_fbase = self.folded_of(new_base)
        self.raw = self.raw[excess:]
        self.base = new_base
        fexcess = new_fbase - self.fbase
        self.folded = self.folded[fexcess:]
        self.fbase = new_fbase
        # Runs entirely before the new base are no longer needed for mapping.
        drop = bisect_right(self.run_rend, new_base)
        if drop:
            del self.run_fph[:drop], self.run_rstart[:drop], self.run_rend[:drop]

    # -- mapping --------------------------------------------------------------------------
    def folded_of(self, offset: int) -> int:
        """Folded chars produced by the raw text before absolute ``offset``."""
        rend = self.run_rend
        if not rend:
            return offset + self.fend - self.synced
        if offset > rend[-1]:  # past the last shortened number (most offsets asked for)
            return self.run_fph[-1] + 1 + (offset - rend[-1])
        k = bisect_right(self.run_rstart, offset) - 1
        if k < 0:
            return self._first_delta() + offset
        if offset <= self.run_rstart[k]:
            return self.run_fph[k]
        if offset <= self.run_rend[k]:
            return self.run_fph[k] + 1
        return self.run_fph[k] + 1 + (offset - self.run_rend[k])

    def raw_of(self, folded: int) -> int:
        """Raw offset where folded char ``folded`` begins (a run's first char for its
        placeholder); ``fend`` maps to ``end``."""
        fph = self.run_fph
        if not fph:
            return folded - (self.fend - self.synced)
        if folded > fph[-1]:  # past the last shortened number (most offsets asked for)
            return self.run_rend[-1] + (folded - fph[-1] - 1)
        k = bisect_right(self.run_fph, folded) - 1
        if k < 0:
            return folded - self._first_delta()
        if folded == self.run_fph[k]:
            return self.run_rstart[k]
        return self.run_rend[k] + (folded - self.run_fph[k] - 1)

    def _first_delta(self) -> int:
        """folded - raw before the first remembered run (the shift of everything trimmed)."""
        if self.run_fph:
            # before run 0 the two views advance together
            return self.run_fph[0] - self.run_rstart[0]
        return self.fend - self.synced

    # -- reading --------------------------------------------------------------------------
    def slice(self, start: int, stop: int) -> str:
        """Raw text between two absolute offsets (clipped to what is still held)."""
        return self.raw[max(0, start - self.base) : max(0, stop - self.base)]

    def fslice(self, start: int, stop: int) -> str:
        """Folded text between two absolute folded offsets (clipped to what is held)."""
        return self.folded[max(0, start - self.fbase) : max(0, stop - self.fbase)]


def ended_lines(win: TextWindow, start: int, cp: int, final: bool) -> list[tuple[str, int, int]]:
    """The lines from ``start`` (a line's start) that have ended by checkpoint ``cp``, each
    with where it begins and where it ends (after its line break); with ``final`` the last
    one too, unended (the text ends there). Rules that judge whole lines read them so. (The
    text before ``cp`` never changes, so the last answer serves the next rule that asks.)"""
    asked = (start, cp, final)
    if win._lines_at == asked:
        return win._lines
    if not final:
        line_start, clear_to = win._unbroken
        searched = clear_to if line_start == start else start
        if win.raw.find("\n", searched - win.base, cp - win.base) < 0:
            win._unbroken = (start, cp)
            win._lines_at, win._lines = asked, []
            return win._lines
    text = win.slice(start, cp)
    lines: list[tuple[str, int, int]] = []
    at = 0
    while at < len(text):
        brk = text.find("\n", at)
        if brk < 0:
            if not final:
                break  # the line goes on past the checkpoint
            brk = len(text) - 1  # the last line, unended: judged as it is
        lines.append((text[at : brk + 1], start + at, start + brk + 1))
        at = brk + 1
    win._lines_at, win._lines = asked, lines
    return lines
