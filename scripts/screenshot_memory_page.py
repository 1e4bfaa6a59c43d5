#!/usr/bin/env python3
"""Screenshots of the Memory page under each backend, for docs/memory.md (DOC-3).

    python scripts/screenshot_memory_page.py [--out docs/images] [--chromium /usr/bin/chromium]

Needs the ``dev`` and ``web`` extras and a Chromium. Under Loom the Diagnostics card shows what
a real ``LoomMemory`` reports after a health probe against the dev gateway (``nerve dev
gateway``, started here on loopback); the page itself is served by ``memory_router`` on
loopback and photographed by Playwright. Writes ``memory-page-memu.png`` and
``memory-page-loom.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import sync_playwright
from starlette.applications import Starlette

from provisioner.config.loader import load_config
from provisioner.config.model import Config
from provisioner.devgateway.serve import serve_in_thread
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.web import memory_router

REPO_ROOT = Path(__file__).resolve().parent.parent
VIEWPORT = {"width": 960, "height": 240}  # the page grows it to its full height
DASHBOARD = "https://loom.example.com/orgs/dev/namespaces/agent"
START_TIMEOUT_S = 10.0


class Snapshot:
    """Diagnostics taken from a live backend, served as they were taken."""

    def __init__(self, diagnostics: dict[str, Any]) -> None:
        self._diagnostics = diagnostics

    def diagnostics(self) -> dict[str, Any]:
        return self._diagnostics


def load(folder: Path, text: str) -> Config:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(text, encoding="utf-8")
    return load_config(folder, None, {})


async def probed_diagnostics(config: Config) -> dict[str, Any]:
    """A health probe through the dev gateway, then the backend's diagnostics."""
    async with LoomMemory.from_config(config) as memory:
        await memory.health()
        return memory.diagnostics()


@contextmanager
def served(config: Config, memory: Any = None) -> Iterator[str]:
    """The router on a loopback port in a thread; yields its base URL."""
    app = Starlette(routes=memory_router(config, memory).routes)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", lifespan="off")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the page server did not start")
        time.sleep(0.01)
    try:
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)


def photograph(browser: Any, base_url: str, target: Path) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    try:
        page.goto(f"{base_url}/memory")
        page.screenshot(path=str(target), full_page=True)
    finally:
        page.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "docs" / "images")
    parser.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nerve-screens-") as scratch, serve_in_thread() as gw:
        memu = load(Path(scratch) / "memu", "memory:\n  backend: memu\n")
        loom = load(
            Path(scratch) / "loom",
            f"memory:\n  backend: loom\n  loom:\n    dashboard_url: {DASHBOARD}\n"
            f"mcp_gateway_url: {gw.base_url}\n",
        )
        snapshot = Snapshot(asyncio.run(probed_diagnostics(loom)))
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(args.chromium), args=["--no-sandbox"]
            )
            try:
                for name, config, memory in (("memu", memu, None), ("loom", loom, snapshot)):
                    target = args.out / f"memory-page-{name}.png"
                    with served(config, memory) as base_url:
                        photograph(browser, base_url, target)
                    print(f"wrote {target}")
            finally:
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
