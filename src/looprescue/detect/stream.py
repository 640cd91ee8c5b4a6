"""The public detector: two channels per stream, each with its own state."""

from __future__ import annotations

from collections.abc import Sequence

from looprescue.config import DetectorConfig, LoopRescueConfig, Watch
from looprescue.detect.asked import asked_ranges, asked_sections, largest_count
from looprescue.detect.channel import ChannelDetector
from looprescue.detect.hits import CHANNELS, Channel, Hit


def _detector_config(config: DetectorConfig | LoopRescueConfig | None) -> DetectorConfig:
    if config is None:
        return DetectorConfig()
    if isinstance(config, LoopRescueConfig):
        return config.detector
    return config


class StreamDetector:
    """Watches the ``reasoning`` and ``text`` channels of one model stream.

    ``feed`` returns the loop a delta completed, if any. Decisions depend only on the text,
    never on how it was split into deltas. A channel not watched is never flagged.
    """

    def __init__(
        self,
        config: DetectorConfig | LoopRescueConfig | None = None,
        watch: Watch | None = None,
        asked: tuple[tuple[int, int], ...] = (),
        asked_up_to: int | None = None,
        correction: tuple[str, ...] = (),
        shown: str = "",
        shown_loop: str = "",
        sections: tuple[tuple[int, str], ...] = (),
    ) -> None:
        """``asked``: the numbered ranges the request asks for (``detect.asked``), which bound
        the lists of the answer (the text channel); ``asked_up_to``: the largest count the
        request names (``detect.asked.largest_count``), None when there is no request (offline
        text: ``rules.counted`` then has no bound and stays off); ``correction``: the
        sentences of the correction a continuation was sent, which its answer must not copy
        (``rules.parrot``);
        ``shown``: the answer a continuation's client already has, which it must not write
        again, and ``shown_loop`` the kept copy of the cut loop in it (``rules.restate``);
        ``sections``: the small counts of sections the request asks for, which bound the
        answer's headings that name them (``detect.asked.asked_sections``)."""
        cfg = _detector_config(config)
        if watch is None:
            watch = config.watch if isinstance(config, LoopRescueConfig) else "both"
        self._cfg = cfg
        self.watch = watch
        self._asked = asked
        self._asked_up_to = asked_up_to
        self._correction = correction
        self._shown = shown
        self._shown_loop = shown_loop
        self._sections = sections
        # A channel's detector is made when the channel is first used: most streams use one
        # channel, and a detector's rules cost more to set up than a short stream to watch.
        self._channels: dict[Channel, ChannelDetector] = {}
        self._watched: dict[Channel, ChannelDetector] = {}  # the watched ones made so far
        self._consumed_unwatched: dict[Channel, int] = dict.fromkeys(CHANNELS, 0)

    def _new_channel(self, channel: Channel) -> ChannelDetector:
        if channel != "text":
            # the request bounds a counted template in the reasoning too: a model that counts
            # one step on and on past anything asked is stuck there as much as in its answer;
            # and a list run past the asked range there, once its items say the same again
            # (``rules.overrun``)
            return ChannelDetector(
                channel, self._cfg, asked=self._asked, asked_up_to=self._asked_up_to
            )
        return ChannelDetector(
            channel,
            self._cfg,
            self._asked,
            self._correction,
            self._shown,
            self._shown_loop,
            self._asked_up_to,
            self._sections,
        )

    def watches(self, channel: Channel) -> bool:
        return self.watch == "both" or self.watch == channel

    def _channel(self, channel: Channel) -> ChannelDetector:
        detector = self._channels.get(channel)
        if detector is None:
            _check(channel)
            detector = self._channels[channel] = self._new_channel(channel)
            if self.watches(channel):
                self._watched[channel] = detector
        return detector

    def feed(self, channel: Channel, delta: str) -> Hit | None:
        detector = self._watched.get(channel)
        if detector is None:
            if not self.watches(channel):
                _check(channel)
                self._consumed_unwatched[channel] += len(delta)
                return None
            detector = self._channel(channel)
        # ChannelDetector.feed's hot path, inlined: this runs for every delta.
        if detector.hit is None:
            win = detector._win
            win.pending.append(delta)
            win.end += len(delta)
            if win.end <= detector.wait_until:
                return None
        return detector.advance()

    def flush(self, channel: Channel) -> Hit | None:
        """The channel's text is complete (block end): judge its last chars too."""
        _check(channel)
        if not self.watches(channel) or channel not in self._channels:
            return None  # (nothing was fed to it)
        return self._channels[channel].flush()

    def hit(self, channel: Channel) -> Hit | None:
        _check(channel)
        detector = self._channels.get(channel)
        return detector.hit if detector is not None else None

    def consumed(self, channel: Channel) -> int:
        _check(channel)
        if not self.watches(channel):
            return self._consumed_unwatched[channel]
        detector = self._channels.get(channel)
        return detector.consumed if detector is not None else 0

    def safe_offset(self, channel: Channel) -> int:
        detector = self._watched.get(channel)  # called after every delta: one lookup
        if detector is not None:
            return detector.safe_offset()
        if self.watches(channel):
            return self._channel(channel).safe_offset()
        _check(channel)
        return self._consumed_unwatched[channel]

    def reset(self, channel: Channel) -> None:
        """Start the channel afresh (offsets restart at zero)."""
        _check(channel)
        self._channels.pop(channel, None)
        self._watched.pop(channel, None)
        self._consumed_unwatched[channel] = 0


def _check(channel: str) -> None:
    if channel not in CHANNELS:
        raise ValueError(f"unknown channel {channel!r}; expected one of {CHANNELS}")


def scan_text(
    text: str,
    channel: Channel = "reasoning",
    config: DetectorConfig | LoopRescueConfig | None = None,
    request: Sequence[str] = (),
    asked_up_to: int | None = None,
) -> list[Hit]:
    """Hits in a complete text: the same as streaming it in any chunking, then flushing.
    ``request``: what the human wrote before the text, one piece per message, the latest
    last; its ranges and counts bound the text's lists as the proxy's request does (empty:
    no request, and ``rules.counted`` stays off). ``asked_up_to``: the largest count the
    pieces name, when the caller keeps it as they come (``detector_for``)."""
    if not request:
        plain = ChannelDetector(channel, _detector_config(config))
        hit = plain.feed(text) or plain.flush()
    else:
        detector = detector_for(config, request, watch="both", asked_up_to=asked_up_to)
        hit = detector.feed(channel, text) or detector.flush(channel)
    return [hit] if hit is not None else []


def detector_for(
    config: DetectorConfig | LoopRescueConfig | None,
    request: Sequence[str],
    watch: Watch | None = None,
    asked_up_to: int | None = None,
) -> StreamDetector:
    """A detector for text written after ``request`` (what the human wrote, one piece per
    message, the latest last), as the proxy makes one for a request: the latest message's
    ranges and small counts bound the answer's lists, and any count the human named bounds a
    counted template. No request: ``rules.counted`` stays off. ``asked_up_to``: that largest
    count, when the caller keeps it as the pieces come (``largest_count`` of each piece, the
    largest kept): a session's scan asks for a detector per answer, and reading every piece
    again for each would cost the square of the session's length."""
    if not request:
        return StreamDetector(config, watch)
    prompt = request[-1]
    return StreamDetector(
        config,
        watch,
        asked=asked_ranges(prompt),
        asked_up_to=largest_count("\n".join(request)) if asked_up_to is None else asked_up_to,
        sections=asked_sections(prompt),
    )
