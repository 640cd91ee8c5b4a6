"""Errors raised while reading or editing DSH session logs.

Every error names the file and, when known, the zstd frame (index and byte offset), the line
number and the last event seq that was read successfully, so a user can find the damage.
"""

from __future__ import annotations

from pathlib import Path


class SessionFormatError(Exception):
    """A session log cannot be read as DSH wrote it (or cannot be read at all).

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

    def _render(self) -> str:
        where = []
        if self.frame is not None:
            where.append(f"frame {self.frame}")
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.line is not None:
            where.append(f"line {self.line}")
        text = f"{self.path}: " if self.path is not None else ""
        text += self.reason
        if where:
            text += f" ({', '.join(where)})"
        if self.last_good_seq is not None:
            text += f"; last good seq {self.last_good_seq}"
        return text

    def fill(self, **context: object) -> SessionFormatError:
        """Add context the raiser did not know (only fields still unset); returns self."""
        for key, value in context.items():
            if value is not None and getattr(self, key) is None:
                setattr(self, key, Path(value) if key == "path" else value)
        self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class SessionAccessError(SessionFormatError):
    """The file or directory is missing, vanished, or cannot be opened (permissions)."""


class TornTailError(SessionFormatError):
    """The log ends inside a frame or a line: a crash during an append. ``repair`` fixes it."""


class NoSessionsError(SessionFormatError):
    """A directory given as input holds no DSH session logs."""


class SessionLockedError(SessionFormatError):
    """DSH holds ``session.lock``: the session is open in a running DSH process."""
