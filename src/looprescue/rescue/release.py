"""The release queue: upstream content waiting until the detector clears it.

Channel text is queued as :class:`Held` pieces (with their channel offsets); the events that
must keep their place relative to that text (tool-call pieces, signatures, block stops) are
queued between them. :meth:`ReleaseQueue.release` lets everything out up to each channel's
safe offset, in order, merging consecutive pieces of one block into one :class:`Released` run
so a held tail and the next delta's head make one client frame. Each piece keeps the time it
came in, on the clock the adapter tells the engine, so the engine can bound how long text waits
(:meth:`ReleaseQueue.due_end`, ``holdMaxMs``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .events import Channel, UpstreamEvent

# Both are made once per delta: their __init__ is written out (see ``events.py``).


@dataclass(slots=True, init=False)
class Held:
    """Channel text waiting in the queue; ``start`` is its offset in the channel, ``at`` the
    adapter's time (ms) when it came in."""

    up_index: int
    channel: Channel
    start: int
    text: str
    at: float

    def __init__(self, up_index: int, channel: Channel, start: int, text: str, at: float) -> None:
        self.up_index = up_index
        self.channel = channel
        self.start = start
        self.text = text
        self.at = at

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass(slots=True, init=False, unsafe_hash=True)
class Released:
    """A run of text of one upstream block that may go to the client now."""

    up_index: Final[int]
    channel: Final[Channel]
    text: Final[str]

    def __init__(self, up_index: int, channel: Channel, text: str) -> None:
        self.up_index = up_index
        self.channel = channel
        self.text = text


Item = Released | UpstreamEvent


class ReleaseQueue:
    """FIFO of held text and the events queued behind it."""

    __slots__ = ("_entries", "held_chars")

    def __init__(self) -> None:
        self._entries: deque[Held | UpstreamEvent] = deque()
        self.held_chars = 0

    def __bool__(self) -> bool:
        return bool(self._entries)

    def push_text(
        self, up_index: int, channel: Channel, start: int, text: str, at: float = 0.0
    ) -> None:
        self._entries.append(Held(up_index, channel, start, text, at))
        self.held_chars += len(text)

    def oldest_at(self) -> float | None:
        """When the text first in the queue came in (None: no text waits first)."""
        entries = self._entries
        if entries and isinstance(entries[0], Held):
            return entries[0].at
        return None

    def restamp(self, at: float) -> None:
        """Date every waiting piece ``at`` (the adapter's clock starts: earlier pieces had
        no time)."""
        for entry in self._entries:
            if isinstance(entry, Held):
                entry.at = at

    def push_event(self, event: UpstreamEvent) -> None:
        self._entries.append(event)

    def due_end(self, channel: Channel, due: float) -> int:
        """Where ``channel``'s text that came in at ``due`` or before ends (-1: none of it
        waits): the queue is in arrival order, so only its head is looked at."""
        end = -1
        for entry in self._entries:
            if not isinstance(entry, Held):
                continue
            if entry.at > due:
                break
            if entry.channel == channel:
                end = entry.start + len(entry.text)
        return end

    def release(
        self, safe_offset: Callable[[Channel], int] | None, known: dict[str, int] | None = None
    ) -> list[Item]:
        """Everything up to ``safe_offset(channel)`` (all of it when ``safe_offset`` is None);
        ``known`` holds channels' safe offsets already at hand (asked once per call)."""
        entries = self._entries
        out: list[Item] = []
        # the two channels' limits, -1 until asked (plain locals: this runs once per read)
        text_limit = reasoning_limit = -1
        if known:
            text_limit = known.get("text", -1)
            reasoning_limit = known.get("reasoning", -1)
        run: list[str] = []
        run_index = -1  # the block of the run being merged (-1: none)
        run_channel: Channel = "text"
        released = 0
        while entries:
            entry = entries[0]
            if not isinstance(entry, Held):
                if run_index >= 0:
                    out.append(Released(run_index, run_channel, "".join(run)))
                    run, run_index = [], -1
                entries.popleft()
                out.append(entry)
                continue
            channel = entry.channel
            if safe_offset is None:
                limit = entry.end
            elif channel == "text":
                if text_limit < 0:
                    text_limit = safe_offset(channel)
                limit = text_limit
            else:
                if reasoning_limit < 0:
                    reasoning_limit = safe_offset(channel)
                limit = reasoning_limit
            start = entry.start
            if limit <= start:
                break
            if entry.up_index != run_index or channel != run_channel:
                if run_index >= 0:
                    out.append(Released(run_index, run_channel, "".join(run)))
                    run = []
                run_index, run_channel = entry.up_index, channel
            text = entry.text
            if limit >= start + len(text):
                entries.popleft()
                run.append(text)
                released += len(text)
                continue
            cut = limit - start
            run.append(text[:cut])
            released += cut
            entries[0] = Held(entry.up_index, channel, limit, text[cut:], entry.at)
            break
        if run_index >= 0:
            out.append(Released(run_index, run_channel, "".join(run)))
        self.held_chars -= released
        return out

    def drain_keeping(self, channel: Channel, keep_to: int) -> list[Item]:
        """Empty the queue: ``channel`` text up to offset ``keep_to`` and everything else comes
        out in order, consecutive pieces of one block as one run; ``channel`` text from
        ``keep_to`` on is dropped."""
        out: list[Item] = []
        run: list[str] = []
        run_key: tuple[int, Channel] | None = None
        while self._entries:
            entry = self._entries.popleft()
            if isinstance(entry, Held):
                if entry.channel != channel or entry.end <= keep_to:
                    text = entry.text
                elif entry.start < keep_to:
                    text = entry.text[: keep_to - entry.start]
                else:
                    continue
                key = (entry.up_index, entry.channel)
                if key != run_key:
                    if run_key is not None:
                        out.append(Released(run_key[0], run_key[1], "".join(run)))
                    run, run_key = [], key
                run.append(text)
                continue
            if run_key is not None:
                out.append(Released(run_key[0], run_key[1], "".join(run)))
                run, run_key = [], None
            out.append(entry)
        if run_key is not None:
            out.append(Released(run_key[0], run_key[1], "".join(run)))
        self.held_chars = 0
        return out
