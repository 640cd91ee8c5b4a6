"""Headless Chromium for tests that look at a page the way a person would.

Debian's ``chromium`` is used (installed with apt-get when missing; CI runs as root), driven
by Playwright with ``executable_path``: Playwright's own browser download is never used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
# As root on a machine without a network: no sandbox, no GPU, nothing that phones home.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class BrowserUnavailable(RuntimeError):
    pass


def ensure_chromium() -> str:
    """The Chromium executable, installed from Debian's packages if it is missing."""
    found = shutil.which("chromium") or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BrowserUnavailable("chromium is missing; install it: apt-get install -y chromium")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise BrowserUnavailable(f"apt-get install chromium failed: {result.stderr[-2000:]}")
    return shutil.which("chromium") or CHROMIUM


@contextmanager
def chromium_page(profile_dir: Path, **page_options: Any) -> Iterator[Any]:
    """A Playwright page in headless Debian Chromium with a fresh profile in ``profile_dir``."""
    from playwright.sync_api import sync_playwright

    executable = ensure_chromium()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            **page_options,
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()
