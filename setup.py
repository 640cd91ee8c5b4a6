"""Compiles the per-chunk path with mypyc where a C compiler is at hand; pure Python otherwise.

The detector runs on every streamed delta (docs/detector.md): compiled, the same source runs
1.5 to 1.9 times as fast. The rescue engine, its events and the proxy's SSE parsing, protocol
codecs, exchange, HTTP server and upstream client run on every upstream chunk too, so they
are compiled with it. Set LOOPRESCUE_PURE=1 to install it all uncompiled. Each extension is
optional, so a machine without a compiler gets the pure-Python package, which behaves the
same.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import Extension, setup

# Every module of the detector (rules, segmenter, window), and the modules every upstream chunk
# of a rescued stream passes through: the engine, its events, the SSE parser and codecs, and
# the proxy's own HTTP server and upstream client, whose protocol callbacks run once per
# network read. (Compiled alone, the rescue engine saved nothing per chunk; with its events
# and the codecs that build them native too, a rescued stream's reads cost less CPU in one
# process. The server and the client compiled took observe from 24.5 to 21.2 us per chunk in
# one run of bench_proxy_cpu. The rest of looprescue runs once per request.)
RESCUE = ("attempt", "blocks", "budget", "cut", "engine", "events", "release", "stats")
WIRE = ("anthropic", "base", "jsonfast", "openai", "responses", "sse")
EXCHANGE = ("core", "feed")
PROXY = ("http1", "server")
HOT_PATH = (
    [f"src/looprescue/rescue/{name}.py" for name in RESCUE]
    + [f"src/looprescue/wire/{name}.py" for name in WIRE]
    + [f"src/looprescue/exchange/{name}.py" for name in EXCHANGE]
    + [f"src/looprescue/proxy/{name}.py" for name in PROXY]
)
COMPILED = (
    sorted(
        str(path)
        for path in Path("src/looprescue/detect").rglob("*.py")
        if path.name != "__init__.py"
    )
    + HOT_PATH
)


def compiled_extensions() -> list[Extension]:
    if os.environ.get("LOOPRESCUE_PURE") == "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # built without the build requirements (e.g. setup.py run by hand)
        return []
    # Modules not compiled (the pydantic config model, the detector's callers) are not read for
    # types: the compiled code handles them as Python objects.
    options = ["--ignore-missing-imports", "--follow-imports=skip"]
    extensions = mypycify(options + COMPILED, opt_level="3")
    for extension in extensions:
        extension.optional = True
    return extensions


setup(ext_modules=compiled_extensions())
