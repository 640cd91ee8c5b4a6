"""Peak memory of the current process, for benchmarks that run each pass in a child."""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """High-water resident set size of this process, in MB.

    Linux's ``ru_maxrss`` survives ``exec``, so a child started by a big parent would report the
    parent's size; ``VmHWM`` belongs to the process's own memory map and does not.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
