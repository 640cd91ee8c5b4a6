"""How each agent CLI is run headless and offline, and where its answer and transcripts are.

Every client gets a fresh HOME, a dummy key, a base URL on 127.0.0.1 and every update check,
telemetry and model-list fetch turned off. The environment is built from nothing, so no key or
setting of the machine's user reaches a client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.clients.install import BIN_DIR

MODEL = "scripted-model"
DUMMY_KEY = "dummy-key-for-the-scripted-model"


@dataclass(frozen=True)
class RunDirs:
    """One client run's folders: its HOME (transcripts land there) and its working folder."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def create(self) -> None:
        for folder in (self.home, self.work, self.root / "tmp"):
            folder.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Finished:
    """What a client run gave: its answer as a user sees it, or why it has none."""

    output: str
    error: str | None = None


def base_env(run: RunDirs) -> dict[str, str]:
    return {
        # rg: opencode's glob and grep tools download it when it is missing (no network here)
        "PATH": f"{BIN_DIR}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(run.home),
        "TMPDIR": str(run.root / "tmp"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        # the run folders sit inside this repository's work tree: a client must not take it
        # for its project (opencode indexes every work tree of a repository it finds)
        "GIT_CEILING_DIRECTORIES": str(run.root),
    }


class Agent:
    name = ""
    protocol = ""  # the API the client speaks: "anthropic", "openai" or "responses"
    # the tool the scripted model calls to list the working folder, and its arguments
    list_tool: tuple[str, Mapping[str, Any]] = ("", {})

    def command(self, run: RunDirs, base_url: str, prompt: str) -> tuple[list[str], dict]:
        raise NotImplementedError

    def finished(self, stdout: str) -> Finished:
        """The final answer from the client's stdout (plain text clients print only that)."""
        return Finished(stdout.strip())


class ClaudeCode(Agent):
    name = "claude"
    protocol = "anthropic"
    list_tool = ("Glob", {"pattern": "*.txt"})

    def command(self, run: RunDirs, base_url: str, prompt: str) -> tuple[list[str], dict]:
        env = base_env(run)
        env.update(
            ANTHROPIC_BASE_URL=base_url,
            ANTHROPIC_API_KEY=DUMMY_KEY,
            ANTHROPIC_MODEL=MODEL,
            ANTHROPIC_DEFAULT_HAIKU_MODEL=MODEL,
            ANTHROPIC_DEFAULT_SONNET_MODEL=MODEL,
            ANTHROPIC_DEFAULT_OPUS_MODEL=MODEL,
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_TELEMETRY="1",
            DISABLE_AUTOUPDATER="1",
            DISABLE_ERROR_REPORTING="1",
            CLAUDE_CONFIG_DIR=str(run.home / ".claude"),
        )
        argv = [
            "claude",
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Glob,WebSearch",
        ]
        return argv, env

    def finished(self, stdout: str) -> Finished:
        # stream-json: one event a line, the last one the result (the text after the last
        # thinking block); every message of the turn is on the lines before it
        results = []
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "result":
                results.append(event)
        if not results:
            return Finished("", "no result event in the stream-json output")
        result = results[-1]
        if result.get("is_error") or result.get("subtype") != "success":
            return Finished(str(result.get("result", "")), f"result event: {json.dumps(result)}")
        return Finished(str(result.get("result", "")).strip())


class Codex(Agent):
    name = "codex"
    protocol = "responses"
    list_tool = ("exec_command", {"cmd": "ls"})

    def command(self, run: RunDirs, base_url: str, prompt: str) -> tuple[list[str], dict]:
        codex_home = run.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            f'model = "{MODEL}"\n'
            'model_provider = "local"\n'
            "check_for_update_on_startup = false\n"
            "[analytics]\nenabled = false\n"
            "[feedback]\nenabled = false\n"
            "[model_providers.local]\n"
            'name = "local"\n'
            f'base_url = "{base_url}/v1"\n'
            'env_key = "LOCAL_API_KEY"\n'
            # Codex refuses "chat" at start-up
            'wire_api = "responses"\n',
            encoding="utf-8",
        )
        env = base_env(run)
        env.update(CODEX_HOME=str(codex_home), LOCAL_API_KEY=DUMMY_KEY)
        # its sandbox cannot start inside a container; the working folder is a scratch one
        argv = [
            "codex",
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-C",
            str(run.work),
            prompt,
        ]
        return argv, env


class Opencode(Agent):
    name = "opencode"
    protocol = "openai"
    list_tool = ("glob", {"pattern": "*.txt"})

    def command(self, run: RunDirs, base_url: str, prompt: str) -> tuple[list[str], dict]:
        model = {
            "name": "Scripted model",
            "reasoning": True,
            "tool_call": True,
            "limit": {"context": 128000, "output": 8192},
        }
        config = {
            "provider": {
                "local": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Local",
                    "options": {"baseURL": f"{base_url}/v1", "apiKey": DUMMY_KEY},
                    "models": {MODEL: model},
                }
            },
            "model": f"local/{MODEL}",
            "small_model": f"local/{MODEL}",
            "autoupdate": False,
            "share": "disabled",
        }
        path = run.home / "opencode.json"
        path.write_text(json.dumps(config, indent=1), encoding="utf-8")
        env = base_env(run)
        env.update(
            OPENCODE_CONFIG=str(path),
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_SHARE="1",
        )
        argv = ["opencode", "run", "--model", f"local/{MODEL}", "--thinking"]
        return [*argv, "--dir", str(run.work), prompt], env


class QwenCode(Agent):
    name = "qwen"
    protocol = "openai"
    list_tool = ("glob", {"pattern": "*.txt"})

    def command(self, run: RunDirs, base_url: str, prompt: str) -> tuple[list[str], dict]:
        settings = {
            "security": {"auth": {"selectedType": "openai"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        }
        folder = run.home / ".qwen"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
        env = base_env(run)
        env.update(OPENAI_API_KEY=DUMMY_KEY, OPENAI_BASE_URL=f"{base_url}/v1", OPENAI_MODEL=MODEL)
        return ["qwen", prompt, "--output-format", "text"], env


AGENTS: dict[str, Agent] = {
    agent.name: agent for agent in (ClaudeCode(), Codex(), Opencode(), QwenCode())
}
