"""Errors raised while reading or editing DSH session logs.

Every error names the file and, when known, the zstd frame (index and byte offset), the line
number and the last event seq that was read successfully, so a user can find the damage.

``SessionFormatError`` means the log's bytes are not what DSH writes. The others are about
the situation around a log: it cannot be opened (``SessionAccessError``), DSH holds it
(``SessionLockedError``), it changed under an edit (``SessionChangedError``), or an edit
cannot be carried out safely (``SessionEditError``).
"""

from __future__ import annotations

from pathlib import Path

from looprescue.errors import LoopRescueError


class SessionError(LoopRescueError):
    """A problem with one session log, with where it is.

    Attributes: ``path``, ``reason``, ``frame`` (0-based frame index), ``offset`` (byte offset
    of that frame, or of the line in a plain file), ``line`` (1-based, the header is line 1),
    ``last_good_seq`` (seq of the last valid event before the problem; None if none).
    """

    def __init__(
        self,
        reason: str,
        *,
        path: Path | str | None = None,
        frame: int | None = None,
        offset: int | None = None,
        line: int | None = None,
        last_good_seq: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = Path(path) if path is not None else None
        self.frame = frame
        self.offset = offset
        self.line = line
        self.last_good_seq = last_good_seq
        super().__init__(self._render())

    def to_dict(self) -> dict:
        """The error as a JSON record (what ``--json`` commands print for it)."""
        return {
            "kind": "error",
            "path": str(self.path) if self.path else None,
            "message": str(self),
            "frame": self.frame,
            "offset": self.offset,
            "line": self.line,
            "lastGoodSeq": self.last_good_seq,
        }

    def where(self) -> str:
        """``frame 3, byte 584, line 9`` (the known parts)."""
        parts = []
        if self.frame is not None:
            parts.append(f"frame {self.frame}")
        if self.offset is not None:
            parts.append(f"byte {self.offset}")
        if self.line is not None:
            parts.append(f"line {self.line}")
        return ", ".join(parts)

    def _render(self) -> str:
        text = f"{self.path}: " if self.path is not None else ""
        text += self.reason
        if where := self.where():
            text += f" ({where})"
        if self.last_good_seq is not None:
            text += f"; last good seq {self.last_good_seq}"
        return text

    def fill(self, **context: object) -> SessionError:
        """Add context the raiser did not know (only fields still unset); returns self."""
        for key, value in context.items():
            if value is not None and getattr(self, key) is None:
                setattr(self, key, Path(value) if key == "path" else value)  # type: ignore[arg-type]
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class SessionFormatError(SessionError):
    """A session log cannot be read as DSH wrote it: bad frames, bad JSON, envelope rules,
    or a field of the wrong type."""


class TornTailError(SessionFormatError):
    """The log ends inside a frame or a line: a crash during an append. ``repair`` fixes it."""


class SessionAccessError(SessionError):
    """The file or directory is missing, vanished, is not a regular file, or cannot be opened
    (permissions)."""


class NoSessionsError(SessionAccessError):
    """A directory given as input holds no DSH session logs."""


class SessionLockedError(SessionError):
    """DSH holds ``session.lock``: the session is open in a running DSH process."""


class SessionChangedError(SessionError):
    """The log changed while it was being edited (a writer that could not be locked out)."""


class SessionEditError(SessionError):
    """An edit cannot be carried out safely (read-only layout, a backup or a verification that
    does not match); nothing was changed."""
