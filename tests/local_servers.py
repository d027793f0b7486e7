"""What the browser tests share: a free port, a server process that stops with its block, a wait
until it answers, and headless Debian Chromium driven by Playwright."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
QUIET = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running(command: list[str], log: Path, **kwargs) -> Iterator[subprocess.Popen]:
    r"""Run ``command`` (output to ``log``) for the duration of the block; stop it after."""
    with open(log, "w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, **kwargs)
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def wait_for(url: str, process: subprocess.Popen, log: Path, what: str, seconds: float = 60) -> None:
    r"""Wait until ``url`` answers; fail with the end of ``log`` if ``process`` dies or time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{what} did not start:\n{log.read_text()[-4000:]}") from None
            time.sleep(0.5)


@contextlib.contextmanager
def headless_chromium(extra_args: tuple[str, ...] = ()):
    r"""Debian's Chromium driven by Playwright, quiet (no background requests), for the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=[*QUIET, *extra_args])
        try:
            yield chromium
        finally:
            chromium.close()
