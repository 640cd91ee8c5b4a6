"""Incremental, sans-IO loop detection over streamed model text.

>>> from looprescue.detect import StreamDetector
>>> detector = StreamDetector()
>>> hit = detector.feed("reasoning", "Now. OK. Emit. ")
"""

from looprescue.detect.hits import CHANNELS, Channel, Hit
from looprescue.detect.stream import StreamDetector, detector_for, scan_text

__all__ = ["CHANNELS", "Channel", "Hit", "StreamDetector", "detector_for", "scan_text"]
