"""The root of every error looprescue raises on purpose.

Anything derived from ``LoopRescueError`` is a problem with the input, the environment or the
configuration, reported as one clear message (exit code 2). Any other exception escaping a
command is a bug in looprescue (exit code 3).
"""

from __future__ import annotations


class LoopRescueError(Exception):
    """Base class of looprescue's own errors."""
