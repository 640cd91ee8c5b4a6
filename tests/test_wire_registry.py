"""The registry routes each protocol to its wire, and the layers import only downward."""

from __future__ import annotations

import ast
from pathlib import Path

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


SRC = Path(__file__).resolve().parents[1] / "src"

# each layer's modules and the imports they must not make, even inside a function
LAYERS = [
    (
        "looprescue/wire/base.py",
        (
            "looprescue.wire.anthropic",
            "looprescue.wire.openai",
            "looprescue.wire.responses",
            "looprescue.wire.registry",
        ),
    ),
    ("looprescue/wire/*.py", ("looprescue.exchange", "looprescue.proxy")),
    ("looprescue/exchange/*.py", ("looprescue.proxy", "starlette", "httptools", "httpx")),
]


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports made absolute."""
    package = ".".join(path.relative_to(SRC).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize(("pattern", "forbidden"), LAYERS)
def test_a_layer_imports_nothing_above_it(pattern: str, forbidden: tuple[str, ...]) -> None:
    paths = sorted(SRC.glob(pattern))
    assert paths
    wrong = {
        f"{path.relative_to(SRC)}: {name}"
        for path in paths
        for name in imported_modules(path)
        if name.startswith(forbidden)
    }
    assert not wrong


def test_the_import_check_resolves_relative_imports() -> None:
    module = SRC / "looprescue" / "wire" / "base.py"
    names = imported_modules(module)
    assert "looprescue.wire.sse.SSEEvent" in names and "looprescue.rescue.events" in names
