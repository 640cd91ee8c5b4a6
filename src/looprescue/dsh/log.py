"""``open_log``: one session log, header read eagerly, events streamed lazily and checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from looprescue.dsh.decoder import Line
from looprescue.dsh.errors import SessionFormatError, TornTailError
from looprescue.dsh.lines import decode_file, detect_encoding, iter_lines
from looprescue.dsh.records import Record, RecordReader, Warnings

# File name -> the header version DSH writes under that name.
LOG_FILE_NAMES = {
    "session.v4.jsonl.zstd": 4,
    "session.v4.jsonl": 4,
    "session.jsonl.zstd": 0,
    "session.jsonl": 0,
}

__all__ = ["LOG_FILE_NAMES", "Record", "SessionLog", "open_log"]


class SessionLog:
    """A readable session log. Iterate ``events()`` as often as needed; each pass re-reads."""

    def __init__(self, path: Path, encoding: str, header: dict, version: int) -> None:
        self.path = path
        self.encoding = encoding  # "zstd" or "plain"
        self.header = header
        self.version = version
        self.warnings: Warnings = Warnings()
        self.torn_tail: TornTailError | None = None
        self.last_seq: int | None = None

    @property
    def is_legacy(self) -> bool:
        return self.version == 0

    @property
    def session_id(self) -> str:
        return self.header["id"]

    @property
    def session_dir(self) -> Path:
        return self.path.parent

    def reader(self) -> RecordReader:
        return RecordReader(self.path, LOG_FILE_NAMES.get(self.path.name))

    def events(self, *, tolerate_torn_tail: bool = False) -> Iterator[dict]:
        """Yield event dicts in order (legacy packed rows expanded), checked as it goes;
        log-only events with a bad field are left out (``warnings`` says which).

        Raises SessionFormatError at the first problem. With ``tolerate_torn_tail`` a log cut
        off during an append ends quietly after its last complete frame (what DSH itself keeps)
        and ``self.torn_tail`` records the damage.
        """
        for record in self.records(tolerate_torn_tail=tolerate_torn_tail):
            if not record.skipped:
                yield record.event

    def records(self, *, tolerate_torn_tail: bool = False) -> Iterator[Record]:
        """Every record with its line and typed view, skipped ones included."""
        reader = self.reader()
        self.warnings = reader.warnings
        self.torn_tail = None
        self.last_seq = None
        try:
            for item in decode_file(self.path, self.encoding):
                if type(item) is Line:
                    for record in reader.feed(item):
                        self.last_seq = reader.last_seq
                        yield record
            if reader.header is None:
                raise SessionFormatError("empty file: no session header", path=self.path, line=1)
        except TornTailError as err:
            err.fill(last_good_seq=reader.last_seq)
            if not tolerate_torn_tail or reader.header is None:
                raise
            self.torn_tail = err
        except SessionFormatError as err:
            raise err.fill(last_good_seq=reader.last_seq) from None


def open_log(path: str | Path) -> SessionLog:
    """Open a ``session.v4.jsonl.zstd``, ``session.v4.jsonl`` or legacy ``session.jsonl[.zstd]``.

    Reads and checks only the header; ``events()`` streams the rest. Any file can be given
    (e.g. a copied backup): the encoding is detected from its bytes, the layout from the header.
    """
    path = Path(path)
    encoding = detect_encoding(path)
    reader = RecordReader(path, LOG_FILE_NAMES.get(path.name))
    lines = iter_lines(path, encoding)
    try:
        first = next(lines, None)
        if first is not None:
            reader.feed(first)
    except TornTailError as err:
        raise err.fill(path=path) from None
    finally:
        lines.close()
    if first is None or reader.header is None:
        raise SessionFormatError("empty file: no session header", path=path, line=1)
    return SessionLog(path, encoding, reader.header, reader.version or 0)
