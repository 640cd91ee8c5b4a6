"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.support.scripted_upstream import ScriptedUpstream


@pytest.fixture
def scripted_upstream() -> Iterator[ScriptedUpstream]:
    """A running scripted model upstream on 127.0.0.1; enqueue responses, inspect requests."""
    with ScriptedUpstream() as upstream:
        yield upstream
