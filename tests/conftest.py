"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.dsh_runtime import DshRuntime, ensure_dsh_runtime
from tests.support.scripted_upstream import ScriptedUpstream


@pytest.fixture
def scripted_upstream() -> Iterator[ScriptedUpstream]:
    """A running scripted model upstream on 127.0.0.1; enqueue responses, inspect requests."""
    with ScriptedUpstream() as upstream:
        yield upstream


@pytest.fixture(scope="session")
def dsh_runtime() -> DshRuntime:
    """The real DSH runtime, installed into .dsh-runtime/ on first use (fails loudly)."""
    return ensure_dsh_runtime()
