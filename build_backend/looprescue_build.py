"""setuptools' build backend, asking for mypy (mypyc) only when the build compiles.

A pure-Python build (LOOPRESCUE_PURE=1, as `make demo` does) compiles nothing, so it need
not install mypy into pip's build environment: that saves a ~50 MB install on the way to a
first run. setup.py still falls back to pure Python when mypyc cannot be imported.
"""

from __future__ import annotations

import os

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the rest of the backend, unchanged

COMPILER = ["mypy>=1.10"]


def _compiler() -> list[str]:
    return [] if os.environ.get("LOOPRESCUE_PURE") == "1" else COMPILER


def get_requires_for_build_wheel(config_settings=None):  # type: ignore[no-untyped-def]
    return _setuptools.get_requires_for_build_wheel(config_settings) + _compiler()


def get_requires_for_build_editable(config_settings=None):  # type: ignore[no-untyped-def]
    return _setuptools.get_requires_for_build_editable(config_settings) + _compiler()
