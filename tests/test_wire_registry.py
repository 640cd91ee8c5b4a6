"""The registry routes each protocol to its wire, and each wire carries its name."""

from __future__ import annotations

import pytest

from looprescue.wire.anthropic import AnthropicWire
from looprescue.wire.openai import OpenAIWire
from looprescue.wire.registry import WIRES, wire_for
from looprescue.wire.responses import ResponsesWire


@pytest.mark.parametrize(
    ("path", "wire"),
    [
        ("/v1/messages", AnthropicWire),
        ("/messages", AnthropicWire),
        ("/anthropic/v1/messages/", AnthropicWire),
        ("/v1/chat/completions", OpenAIWire),
        ("/openai/deployments/x/chat/completions", OpenAIWire),
        ("/v1/responses", ResponsesWire),
        ("/responses/", ResponsesWire),
    ],
)
def test_a_post_to_a_protocol_route_gets_its_wire(path: str, wire: type) -> None:
    assert wire_for("POST", path) is wire


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/embeddings"),
        ("POST", "/v1/responses/abc/cancel"),
        ("POST", "/"),
    ],
)
def test_any_other_request_is_relayed(method: str, path: str) -> None:
    assert wire_for(method, path) is None


def test_each_wire_is_registered_under_the_name_it_carries() -> None:
    assert {name: wire().name for name, wire in WIRES.items()} == {
        "anthropic": "anthropic",
        "openai": "openai",
        "responses": "responses",
    }
