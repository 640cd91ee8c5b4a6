"""Compiles the detector with mypyc where a C compiler is at hand; pure Python otherwise.

The detector runs on every streamed delta (docs/detector.md): compiled, the same source runs
1.5 to 1.9 times as fast. Set LOOPRESCUE_PURE=1 to install it uncompiled. Each extension is
optional, so a machine without a compiler gets the pure-Python package, which behaves the same.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup

# Every module of the detector: rules, segmenter, window. (Compiled too, the rescue engine cost
# the proxy the same CPU per chunk; the rest of looprescue does I/O.)
DETECTOR = sorted(
    str(path) for path in Path("src/looprescue/detect").rglob("*.py") if path.name != "__init__.py"
)


def detector_extensions() -> list[Extension]:
    if os.environ.get("LOOPRESCUE_PURE") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # built without the build requirements (e.g. setup.py run by hand)
        return []
    # Modules outside the detector (the pydantic config model) are not compiled, nor read for
    # types: the compiled code handles them as Python objects.
    options = ["--ignore-missing-imports", "--follow-imports=skip"]
    extensions = mypycify(options + DETECTOR, opt_level="3")
    for extension in extensions:
        extension.optional = True
    return extensions


setup(ext_modules=detector_extensions())
