"""``open_log``: one session log, header read eagerly, events streamed lazily and validated."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from looprescue.dsh.envelope import EnvelopeProblem, check_envelope, check_header, parse_json_line
from looprescue.dsh.errors import SessionFormatError, TornTailError
from looprescue.dsh.legacy import expand_packed_row, is_packed_row
from looprescue.dsh.lines import Line, detect_encoding, iter_lines
from looprescue.dsh.stream import check_stream

# File name -> the header version DSH writes under that name.
LOG_FILE_NAMES = {
    "session.v4.jsonl.zstd": 4,
    "session.v4.jsonl": 4,
    "session.jsonl.zstd": 0,
    "session.jsonl": 0,
}
STREAM_EVENT_TYPES = ("assistant/message", "assistant/attempt")


@dataclass(frozen=True, slots=True)
class Record:
    """A validated event and the physical line it came from (legacy packed rows give several
    records per line)."""

    event: dict
    line: Line


class SessionLog:
    """A readable session log. Iterate ``events()`` as often as needed; each pass re-reads."""

    def __init__(self, path: Path, encoding: str, header: dict, version: int) -> None:
        self.path = path
        self.encoding = encoding  # "zstd" or "plain"
        self.header = header
        self.version = version
        self.warnings: list[str] = []
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

    def events(self, *, tolerate_torn_tail: bool = False) -> Iterator[dict]:
        """Yield event dicts in order (legacy packed rows expanded), validating as it goes.

        Raises SessionFormatError at the first problem. With ``tolerate_torn_tail`` a log cut
        off during an append ends quietly after its last complete frame (what DSH itself keeps)
        and ``self.torn_tail`` records the damage.
        """
        for record in self.records(tolerate_torn_tail=tolerate_torn_tail):
            yield record.event

    def records(self, *, tolerate_torn_tail: bool = False) -> Iterator[Record]:
        self.warnings = []
        self.torn_tail = None
        self.last_seq = None
        expected_seq = 0
        lines = iter_lines(self.path, self.encoding)
        try:
            if next(lines, None) is None:  # the header, validated by open_log
                raise SessionFormatError("empty file: no session header", path=self.path, line=1)
            for line in lines:
                for event in self._decode(line, expected_seq):
                    yield Record(event, line)
                    expected_seq = event["seq"] + 1
                    self.last_seq = event["seq"]
        except TornTailError as err:
            err.fill(last_good_seq=self.last_seq)
            if not tolerate_torn_tail:
                raise
            self.torn_tail = err
        except SessionFormatError as err:
            raise err.fill(last_good_seq=self.last_seq) from None

    def _decode(self, line: Line, expected_seq: int) -> list[dict]:
        try:
            obj = parse_json_line(line.raw)
            if self.is_legacy and is_packed_row(obj):
                return list(expand_packed_row(obj, expected_seq))
            strict = not self.is_legacy
            self.warnings.extend(check_envelope(obj, expected_seq, strict_surface=strict))
            if not self.is_legacy and obj["type"] in STREAM_EVENT_TYPES:
                _check_stream_event(obj)
            return [obj]
        except EnvelopeProblem as problem:
            raise SessionFormatError(
                str(problem),
                path=self.path,
                frame=line.frame,
                offset=line.frame_offset if line.frame is not None else line.offset,
                line=line.number,
                last_good_seq=self.last_seq,
            ) from None


def _check_stream_event(event: dict) -> None:
    data = event["data"]
    where = f"{event['type']} (seq {event['seq']})"
    if not isinstance(data, dict):
        raise EnvelopeProblem(f"{where}: data is not an object")
    if event["type"] == "assistant/message":
        message = data.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            raise EnvelopeProblem(f"{where}: data.message.content must be a list")
    if "stream" in data:
        check_stream(data["stream"], where)


def open_log(path: str | Path) -> SessionLog:
    """Open a ``session.v4.jsonl.zstd``, ``session.v4.jsonl`` or legacy ``session.jsonl[.zstd]``.

    Reads and validates only the header; ``events()`` streams the rest. Any file can be given
    (e.g. a copied backup): the encoding is detected from its bytes, the layout from the header.
    """
    path = Path(path)
    encoding = detect_encoding(path)
    lines = iter_lines(path, encoding)
    try:
        first = next(lines, None)
    except TornTailError as err:
        raise err.fill(path=path) from None
    finally:
        lines.close()
    if first is None:
        raise SessionFormatError("empty file: no session header", path=path, line=1)
    try:
        header = parse_json_line(first.raw)
        version = check_header(header, LOG_FILE_NAMES.get(path.name))
    except EnvelopeProblem as problem:
        raise SessionFormatError(
            str(problem), path=path, frame=first.frame, offset=0, line=1
        ) from None
    return SessionLog(path, encoding, header, version)
