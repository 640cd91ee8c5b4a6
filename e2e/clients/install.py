"""Installs the agent CLIs from npm into the repo's ignored ``.clients/`` folder.

Each CLI is pinned: a new release can change what it sends, and a run should show a change in
the proxy, not in a client. A pinned version that is already there is not installed again, so
only the first run needs the registry. The packages ship their native binaries inside them, so
npm's install scripts are not needed (npm 11 skips them unless allowed).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CLIENTS_DIR = REPO_ROOT / ".clients"
NPM_PREFIX = CLIENTS_DIR / "npm"
BIN_DIR = NPM_PREFIX / "bin"


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    binary: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    def installed_version(self) -> str | None:
        manifest = NPM_PREFIX / "lib" / "node_modules" / self.name / "package.json"
        if not manifest.exists() or not (BIN_DIR / self.binary).exists():
            return None
        return json.loads(manifest.read_text(encoding="utf-8")).get("version")


# The newest versions that run on node 20 without an engine warning (Claude Code, Qwen Code),
# and the newest of the others, as tried.
PACKAGES = {
    "claude": Package("@anthropic-ai/claude-code", "2.1.197", "claude"),
    "codex": Package("@openai/codex", "0.171.0", "codex"),
    "opencode": Package("opencode-ai", "1.18.33", "opencode"),
    "qwen": Package("@qwen-code/qwen-code", "0.15.10", "qwen"),
}


def ensure_installed(names: list[str]) -> None:
    """Installs the named clients that are missing or at another version (needs the registry)."""
    missing = [PACKAGES[n] for n in names if PACKAGES[n].installed_version() != PACKAGES[n].version]
    if not missing:
        return
    specs = [p.spec for p in missing]
    print(f"installing into {NPM_PREFIX}: {' '.join(specs)}", flush=True)
    NPM_PREFIX.mkdir(parents=True, exist_ok=True)
    command = ["npm", "install", "--global", "--prefix", str(NPM_PREFIX), "--no-fund", *specs]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"npm install failed ({done.returncode}):\n{done.stderr[-3000:]}")
    for package in missing:
        if package.installed_version() != package.version:
            raise SystemExit(f"npm installed no {package.spec} under {NPM_PREFIX}")
