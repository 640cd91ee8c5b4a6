"""The public detector: two channels per stream, each with its own state."""

from __future__ import annotations

from looprescue.config import DetectorConfig, LoopRescueConfig, Watch
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
        correction: tuple[str, ...] = (),
        shown: str = "",
        shown_loop: str = "",
    ) -> None:
        """``asked``: the numbered ranges the request asks for (``detect.asked``), which bound
        the lists of the answer (the text channel); ``correction``: the sentences of the
        correction a continuation was sent, which its answer must not copy (``rules.parrot``);
        ``shown``: the answer a continuation's client already has, which it must not write
        again, and ``shown_loop`` the kept copy of the cut loop in it (``rules.restate``)."""
        cfg = _detector_config(config)
        if watch is None:
            watch = config.watch if isinstance(config, LoopRescueConfig) else "both"
        self._cfg = cfg
        self.watch = watch
        self._asked = asked
        self._correction = correction
        self._shown = shown
        self._shown_loop = shown_loop
        self._channels: dict[Channel, ChannelDetector] = {
            ch: self._new_channel(ch) for ch in CHANNELS
        }
        self._consumed_unwatched: dict[Channel, int] = dict.fromkeys(CHANNELS, 0)
        self._bind()

    def _new_channel(self, channel: Channel) -> ChannelDetector:
        if channel != "text":
            return ChannelDetector(channel, self._cfg)
        return ChannelDetector(
            channel, self._cfg, self._asked, self._correction, self._shown, self._shown_loop
        )

    def _bind(self) -> None:
        self._watched = {ch: det for ch, det in self._channels.items() if self.watches(ch)}

    def watches(self, channel: Channel) -> bool:
        return self.watch == "both" or self.watch == channel

    def _channel(self, channel: Channel) -> ChannelDetector:
        try:
            return self._channels[channel]
        except KeyError:
            raise ValueError(f"unknown channel {channel!r}; expected one of {CHANNELS}") from None

    def feed(self, channel: Channel, delta: str) -> Hit | None:
        detector = self._watched.get(channel)
        if detector is not None:
            # ChannelDetector.feed's hot path, inlined: this runs for every delta.
            if detector.hit is None:
                win = detector._win
                win.pending.append(delta)
                win.end += len(delta)
                if win.end <= detector.wait_until:
                    return None
            return detector.advance()
        self._channel(channel)  # raises on an unknown channel name
        self._consumed_unwatched[channel] += len(delta)
        return None

    def flush(self, channel: Channel) -> Hit | None:
        """The channel's text is complete (block end): judge its last chars too."""
        if not self.watches(channel):
            return None
        return self._channel(channel).flush()

    def hit(self, channel: Channel) -> Hit | None:
        return self._channel(channel).hit

    def consumed(self, channel: Channel) -> int:
        if not self.watches(channel):
            return self._consumed_unwatched[channel]
        return self._channel(channel).consumed

    def safe_offset(self, channel: Channel) -> int:
        detector = self._watched.get(channel)  # called after every delta: one lookup
        if detector is not None:
            return detector.safe_offset()
        self._channel(channel)  # raises on an unknown channel name
        return self._consumed_unwatched[channel]

    def reset(self, channel: Channel) -> None:
        """Start the channel afresh (offsets restart at zero)."""
        self._channels[channel] = self._new_channel(self._channel(channel).channel)
        self._consumed_unwatched[channel] = 0
        self._bind()


def scan_text(
    text: str,
    channel: Channel = "reasoning",
    config: DetectorConfig | LoopRescueConfig | None = None,
) -> list[Hit]:
    """Hits in a complete text: the same as streaming it in any chunking, then flushing."""
    detector = ChannelDetector(channel, _detector_config(config))
    hit = detector.feed(text) or detector.flush()
    return [hit] if hit is not None else []
