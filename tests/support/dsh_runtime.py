"""The real DSH runtime for end-to-end tests: install once, run ``dsh headless`` locally.

The PyPI wheel ``deepseek-harness-runtime-bin`` (about 300 MB installed) is installed with
``pip install --target`` into ``<repo>/.dsh-runtime/`` the first time it is needed and reused
afterwards. A file lock makes concurrent pytest runs wait for one installer instead of racing.
An install failure raises :class:`DshRuntimeError` carrying pip's full output.

Runs are how the fixtures in ``tests/fixtures`` were recorded (their ``run.json``):
``dsh headless --patch <overlay> --json [--session-id ID] <prompt>`` with a dummy key,
telemetry disabled and the model route pointed at a loopback base URL (FORMAT.md §11.1, §12).

Usage::

    runtime = ensure_dsh_runtime()
    run = run_dsh_headless(tmp_path / ".dsh", workdir, "say hi", upstream.base_url,
                           runtime=runtime)
    assert run.returncode == 0 and run.final_text
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
import zstandard

REPO_ROOT = Path(__file__).resolve().parents[2]
DSH_RUNTIME_PACKAGE = "deepseek-harness-runtime-bin"
DSH_RUNTIME_VERSION = "0.2.1rc2"
DSH_SDK_PACKAGE = "deepseek-harness-sdk"  # same version as the runtime
RUNTIME_CACHE = REPO_ROOT / ".dsh-runtime"
DUMMY_API_KEY = "sk-fake-local-000"
# Telemetry goes nowhere: the mode is off and the exporter points at the discard port.
TELEMETRY_SINK = "http://127.0.0.1:9/v1/logs"
_INSTALLED_MARKER = ".looprescue-installed"


class DshRuntimeError(RuntimeError):
    """Installing, locating or running the DSH runtime failed (message carries the output)."""


class DshTimeout(DshRuntimeError):
    """``dsh headless`` did not finish in time; it was killed with its process group."""


@dataclass(frozen=True)
class DshRuntime:
    executable: Path
    target: Path
    version: str
    install_seconds: float  # 0.0 when an earlier install was reused


@dataclass
class DshRun:
    """One finished ``dsh headless`` process."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]]
    seconds: float
    home: Path
    overlay: Path
    unparsed_lines: list[str] = field(default_factory=list)

    def events_of(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == event_type]

    @property
    def session_id(self) -> str | None:
        sessions = self.events_of("session")
        return sessions[0].get("sessionId") if sessions else None

    @property
    def final_text(self) -> str | None:
        finals = self.events_of("final")
        return finals[-1].get("text") if finals else None

    def session_dir(self) -> Path:
        """The directory DSH wrote this run's session into (under ``<home>/sessions``)."""
        if self.session_id is None:
            raise DshRuntimeError(f"no session event in DSH output:\n{self.describe()}")
        return find_session_dir(self.home, self.session_id)

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.args)}\nexit {self.returncode} after {self.seconds:.2f}s\n"
            f"--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}"
        )


# --------------------------------------------------------------------------- install


def _runtime_target(cache: Path) -> Path:
    return cache / f"{DSH_RUNTIME_PACKAGE}-{DSH_RUNTIME_VERSION}"


def _locate_executable(target: Path) -> Path:
    # A child interpreter imports the package so the test process's sys.path stays clean.
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import deepseek_harness_runtime as r; print(r.bundled_runtime_path())"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0:
        raise DshRuntimeError(
            f"cannot locate the DSH executable in {target}:\n{result.stdout}{result.stderr}"
        )
    return Path(result.stdout.strip())


def _pip_install(target: Path, requirement: str = "") -> None:
    requirement = requirement or f"{DSH_RUNTIME_PACKAGE}=={DSH_RUNTIME_VERSION}"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--no-deps",
        "--target",
        str(target),
        requirement,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise DshRuntimeError(
            f"installing {requirement} failed "
            f"(exit {result.returncode}):\n$ {' '.join(command)}\n"
            f"{result.stdout}\n{result.stderr}"
        )


def ensure_dsh_runtime(cache: Path = RUNTIME_CACHE) -> DshRuntime:
    """Install the pinned DSH runtime into ``cache`` unless already there; return where it is."""
    cache.mkdir(parents=True, exist_ok=True)
    target = _runtime_target(cache)
    started = time.monotonic()
    installed_now = False
    with (cache / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until the install is complete and marked
        if not (target / _INSTALLED_MARKER).is_file():
            partial = cache / f"{target.name}.partial-{os.getpid()}"
            shutil.rmtree(partial, ignore_errors=True)
            try:
                _pip_install(partial)
                _locate_executable(partial)  # a broken wheel fails here, not in a test
                shutil.rmtree(target, ignore_errors=True)
                partial.rename(target)
            finally:
                shutil.rmtree(partial, ignore_errors=True)
            (target / _INSTALLED_MARKER).write_text(f"{DSH_RUNTIME_VERSION}\n")
            installed_now = True
    executable = _locate_executable(target)
    version = subprocess.run(
        [str(executable), "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**_base_env(), "DSH_HOME": str(cache / "version-probe-home")},
    )
    if version.returncode != 0:
        raise DshRuntimeError(f"{executable} --version failed:\n{version.stdout}{version.stderr}")
    return DshRuntime(
        executable=executable,
        target=target,
        version=version.stdout.strip(),
        install_seconds=time.monotonic() - started if installed_now else 0.0,
    )


def ensure_dsh_sdk(cache: Path = RUNTIME_CACHE) -> Path:
    """Install DSH's Python SDK (``deepseek_harness``) into ``cache`` unless there; return the
    directory to put on ``sys.path``. Only the fixture recorder needs it; its other
    requirement, pydantic, is a dependency of looprescue."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f"{DSH_SDK_PACKAGE}-{DSH_RUNTIME_VERSION}"
    with (cache / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / _INSTALLED_MARKER).is_file():
            shutil.rmtree(target, ignore_errors=True)
            _pip_install(target, f"{DSH_SDK_PACKAGE}=={DSH_RUNTIME_VERSION}")
            (target / _INSTALLED_MARKER).write_text(f"{DSH_RUNTIME_VERSION}\n")
    return target


# --------------------------------------------------------------------------- overlays


def telemetry_off_rows() -> list[dict[str, Any]]:
    return [
        {
            "id": "session-telemetry-otel",
            "config": {
                "mode": "DISABLED",
                "shutdownTimeoutMillis": 500,
                "maxRequestBytes": 4000000,
                "exporter": {"url": TELEMETRY_SINK, "compression": "gzip", "timeoutMillis": 500},
                "processor": {
                    "scheduledDelayMillis": 10000,
                    "maxQueueSize": 16,
                    "maxExportBatchSize": 16,
                    "exportTimeoutMillis": 500,
                },
            },
        }
    ]


def native_route_rows(
    base_url: str, stream_idle_timeout_ms: int = 300000, **llm_config: Any
) -> list[dict[str, Any]]:
    """FORMAT.md §12: the ``llm-deepseek`` row (Anthropic Messages) pointed at ``base_url``.

    ``llm_config`` adds keys to the row (e.g. ``retryPolicy``); a patch replaces the row's
    whole config, so everything the row needs is written here.
    """
    config = {
        "baseURL": base_url,
        "apiKeyEnv": "DEEPSEEK_API_KEY",
        "streamIdleTimeoutMs": stream_idle_timeout_ms,
        **llm_config,
    }
    return [{"id": "llm-deepseek", "config": config}]


def openai_route_rows(
    base_url: str, model: str = "deepseek-chat", max_tokens: int = 8192
) -> list[dict[str, Any]]:
    """FORMAT.md §11.1: a pi-ai ``openai-completions`` provider at ``{base_url}/v1``."""
    provider = {
        "api": "openai-completions",
        "baseURL": base_url.rstrip("/") + "/v1",
        "apiKeyEnv": "DEEPSEEK_API_KEY",
        "models": [
            {
                "id": model,
                "contextWindow": 128000,
                "maxTokens": max_tokens,
                "input": ["text"],
                "reasoningEfforts": {"high": "high"},
                "compat": {
                    "thinkingFormat": "deepseek",
                    "requiresReasoningContentOnAssistantMessages": True,
                    "maxTokensField": "max_tokens",
                    "supportsStore": False,
                    "supportsDeveloperRole": False,
                },
            }
        ],
    }
    return [
        {"id": "llm-pi-ai", "config": {"providers": {"local-oai": provider}}},
        {
            "id": "agent-default-model",
            "config": {"provider": "local-oai", "model": model, "reasoningEffort": "high"},
        },
    ]


def upload_off_rows() -> list[dict[str, Any]]:
    """Stop DSH sending ``dsh_session_log`` / ``dsh_plugin_packages`` (FORMAT.md §12)."""
    return [
        {"id": "session-log-deepseek", "disabled": True},
        {"id": "plugin-package-inventory-deepseek", "disabled": True},
    ]


def write_overlay(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(list(rows), sort_keys=False), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- running


def _base_env() -> dict[str, str]:
    # A clean environment: no proxies, no real keys, nothing from the developer's shell.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    for name in ("TMPDIR", "SYSTEMROOT"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def dsh_env(home: Path, base_url: str, user_home: Path | None = None) -> dict[str, str]:
    """The environment the fixtures were recorded with (``run.json``), for a local upstream."""
    return {
        **_base_env(),
        "HOME": str(user_home if user_home is not None else home.parent),
        "DSH_HOME": str(home),
        "DEEPSEEK_API_KEY": DUMMY_API_KEY,
        "DEEPSEEK_BASE_URL": base_url,
        "DEEPSEEK_SEARCH_BASE_URL": base_url.rstrip("/") + "/v1",
        "DSH_TELEMETRY_MODE": "DISABLED",
        "DSH_TELEMETRY_OTLP_URL": TELEMETRY_SINK,
        "DSH_PERMISSION_MODE": "danger-full-access",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def run_dsh_headless(
    home: Path,
    cwd: Path,
    prompt: str,
    base_url: str,
    session_id: str | None = None,
    json: bool = True,
    timeout: float = 180,
    *,
    route: str = "anthropic",
    runtime: DshRuntime | None = None,
    uploads: bool = True,
    extra_rows: Sequence[Mapping[str, Any]] = (),
    env: Mapping[str, str] | None = None,
    user_home: Path | None = None,
    stream_idle_timeout_ms: int = 300000,
    interrupt_when: Callable[[], bool] | None = None,
) -> DshRun:
    """Run one ``dsh headless`` turn against ``base_url`` and wait for it.

    ``home`` is the DSH home (created if missing; ``HOME`` defaults to its parent, so pass
    ``tmp_path / ".dsh"``), ``cwd`` the project directory. ``route`` is ``"anthropic"`` (the
    native provider, §12) or ``"openai"`` (pi-ai provider, §11.1). ``uploads=False`` disables
    the session-log and package-inventory rows. ``extra_rows`` are appended to the overlay;
    ``env`` overrides variables. ``interrupt_when`` is polled while DSH runs; once it returns
    true DSH gets a SIGINT, as from a Ctrl-C. A non-zero exit is returned, not raised; a
    timeout raises :class:`DshTimeout` after killing DSH's process group.
    """
    runtime = runtime or ensure_dsh_runtime()
    home.mkdir(parents=True, exist_ok=True)
    cwd.mkdir(parents=True, exist_ok=True)
    if route == "anthropic":
        rows = native_route_rows(base_url, stream_idle_timeout_ms)
    elif route == "openai":
        rows = openai_route_rows(base_url)
    else:
        raise ValueError(f"route must be 'anthropic' or 'openai', got {route!r}")
    rows = [*rows, *telemetry_off_rows()]
    if not uploads:
        rows += upload_off_rows()
    rows += list(extra_rows)
    overlay = write_overlay(home / "looprescue-test.patch.yml", rows)
    args = [str(runtime.executable), "headless", "--patch", str(overlay)]
    if json:
        args.append("--json")
    if session_id is not None:
        args += ["--session-id", session_id]
    args.append(prompt)
    full_env = {**dsh_env(home, base_url, user_home), **(env or {})}
    started = time.monotonic()
    process = subprocess.Popen(
        args,
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so nothing it spawns outlives it
    )
    try:
        if interrupt_when is None:
            stdout, stderr = process.communicate(timeout=timeout)
        else:
            stdout, stderr = _communicate_until(process, interrupt_when, started + timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        raise DshTimeout(
            f"dsh headless did not finish within {timeout}s:\n$ {' '.join(args)}\n"
            f"--- stdout\n{stdout[-4000:]}\n--- stderr\n{stderr[-4000:]}"
        ) from None
    finally:
        _kill_group(process)
    events, unparsed = _parse_events(stdout) if json else ([], [])
    return DshRun(
        args=args,
        returncode=process.returncode,
        stdout=stdout,
        stderr=stderr,
        events=events,
        seconds=time.monotonic() - started,
        home=home,
        overlay=overlay,
        unparsed_lines=unparsed,
    )


def _communicate_until(
    process: subprocess.Popen[str], interrupt_when: Callable[[], bool], deadline: float
) -> tuple[str, str]:
    """Wait for ``process``, reading its pipes, and SIGINT it once ``interrupt_when()``."""
    while True:
        try:
            return process.communicate(timeout=0.05)
        except subprocess.TimeoutExpired:
            if interrupt_when():
                process.send_signal(signal.SIGINT)
                return process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if time.monotonic() > deadline:
                raise


def run_dsh_headless_openai(
    home: Path, cwd: Path, prompt: str, base_url: str, **options: Any
) -> DshRun:
    """:func:`run_dsh_headless` over the OpenAI-compatible route (FORMAT.md §11)."""
    return run_dsh_headless(home, cwd, prompt, base_url, route="openai", **options)


def _parse_events(stdout: str) -> tuple[list[dict[str, Any]], list[str]]:
    events: list[dict[str, Any]] = []
    unparsed: list[str] = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            unparsed.append(line)
            continue
        if isinstance(value, dict):
            events.append(value)
        else:
            unparsed.append(line)
    return events, unparsed


# --------------------------------------------------------------------------- session layout


def project_key(cwd: str) -> str:
    """The ``--<project-key>--`` directory name DSH derives from a session cwd (FORMAT §1.2)."""
    data = cwd.encode("utf-16-le")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    out: list[str] = []
    for position, unit in enumerate(units):
        if unit in _SEPARATOR_UNITS:
            if position == 0 or units[position - 1] not in _SEPARATOR_UNITS:
                out.append("-")
        elif unit < 0x80 and (chr(unit).isalnum() or chr(unit) in "._-"):
            out.append(chr(unit))
        else:
            out.append(f"~{unit:04X}")
    key = "".join(out).lstrip("-") or "root"
    return f"--{key[:251]}--"


_SEPARATOR_UNITS = frozenset(map(ord, "/\\:"))


def find_session_dir(home: Path, session_id: str) -> Path:
    """The directory of ``session_id`` under ``<home>/sessions/<project>/``."""
    matches = sorted((home / "sessions").glob(f"*/{session_id}"))
    if len(matches) != 1:
        raise DshRuntimeError(
            f"expected one session dir for {session_id} under {home / 'sessions'}, "
            f"found {[str(m) for m in matches]}"
        )
    return matches[0]


def install_session_copy(home: Path, source_dir: Path, cwd: Path) -> tuple[str, Path]:
    """Copy a recorded session (e.g. a fixture's ``session/`` dir) into ``home`` for ``cwd``.

    DSH only resumes a session from the directory it was recorded in, so the header frame is
    re-encoded with ``cwd``; every other frame keeps its bytes. Returns (session id, new dir).
    """
    source = source_dir / "session.v4.jsonl.zstd"
    raw = source.read_bytes()
    reader = zstandard.ZstdDecompressor().decompressobj()
    header_line = reader.decompress(raw)
    if not reader.eof:
        raise DshRuntimeError(f"{source}: the header frame is incomplete")
    rest = reader.unused_data
    header = json.loads(header_line)
    if header.get("type") != "session" or header_line.count(b"\n") != 1:
        raise DshRuntimeError(f"{source}: frame 1 is not exactly one session header line")
    header["cwd"] = str(cwd)
    compressor = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False)
    new_header = json.dumps(header, ensure_ascii=False, separators=(",", ":")) + "\n"
    target = home / "sessions" / project_key(str(cwd)) / header["id"]
    target.mkdir(mode=0o700, parents=True, exist_ok=False)
    log = target / "session.v4.jsonl.zstd"
    log.write_bytes(compressor.compress(new_header.encode()) + rest)
    log.chmod(0o600)
    return header["id"], target
