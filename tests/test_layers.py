"""The layers (wire, exchange, proxy) import only downward and export what they declare."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("package", ["looprescue.wire", "looprescue.exchange", "looprescue.proxy"])
def test_every_public_name_of_a_layer_is_there(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__all__
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing
