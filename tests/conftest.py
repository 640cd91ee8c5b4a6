"""Shared pytest fixtures; a check that no compiled module is older than its source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.dsh_runtime import DshRuntime, ensure_dsh_runtime
from tests.support.scripted_upstream import ScriptedUpstream

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "looprescue"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Python imports a module's compiled extension before its source (setup.py builds them in
    place): after an edit, tests would run the old code. Stop instead, saying how to rebuild."""
    stale = [
        str(source.relative_to(PACKAGE.parents[1]))
        for compiled in PACKAGE.rglob("*.so")
        if (source := compiled.with_name(compiled.name.split(".")[0] + ".py")).exists()
        and source.stat().st_mtime > compiled.stat().st_mtime
    ]
    if stale:
        pytest.exit(
            f"the compiled code is older than {', '.join(stale)}: run `make test` (or "
            "`pip install -e .`) to compile it again, or delete the *.so files under src/ to "
            "run the source as it is",
            returncode=2,
        )


@pytest.fixture
def scripted_upstream() -> Iterator[ScriptedUpstream]:
    """A running scripted model upstream on 127.0.0.1; enqueue responses, inspect requests."""
    with ScriptedUpstream() as upstream:
        yield upstream


@pytest.fixture(scope="session")
def dsh_runtime() -> DshRuntime:
    """The real DSH runtime, installed into .dsh-runtime/ on first use (fails loudly)."""
    return ensure_dsh_runtime()
