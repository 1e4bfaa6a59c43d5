"""Fixtures of the Memory page tests: the router on a loopback server, and a real browser.

The browser is Debian's Chromium driven by Playwright (Playwright's own browser download is
not used). Without Chromium the browser tests are skipped, except under CI, where ``.ci/run``
installs it and a missing browser is a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from provisioner.config.loader import Config, load_config
from provisioner.web import memory_router
from tests.support.loopback import LoopbackServer
from tests.web.serving import Serve

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(config, memory=None)`` starts the router on loopback and returns its base URL."""
    servers: list[LoopbackServer] = []

    def start(config: Config, memory: Any = None) -> str:
        app = Starlette(routes=memory_router(config, memory).routes)
        server = LoopbackServer(app)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def serve_live() -> Iterator[Serve]:
    """``serve_live(config)``: the router with a real ``LoomMemory``, as Nerve would mount it.

    The backend is opened in the app's lifespan, probed once (a failed probe is recorded in
    its diagnostics, as in Nerve), and closed when the server stops.
    """
    from provisioner.runtime.gateway.errors import GatewayError
    from provisioner.runtime.loom.backend import LoomMemory

    servers: list[LoopbackServer] = []

    def start(config: Config) -> str:
        memory = LoomMemory.from_config(config)

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with memory:
                with contextlib.suppress(GatewayError):
                    await memory.health()
                yield

        app = Starlette(routes=memory_router(config, memory).routes, lifespan=lifespan)
        server = LoopbackServer(app)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def configure(tmp_path: Path) -> Callable[..., Config]:
    """``configure(yaml_text, env={})``: a Config loaded by ``load_config`` from that text."""

    def load(text: str, env: dict[str, str] | None = None) -> Config:
        config_dir = tmp_path / "cfg"
        config_dir.mkdir(exist_ok=True)
        (config_dir / "config.yaml").write_text(text, encoding="utf-8")
        return load_config(config_dir, None, env or {})

    return load


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session."""
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing; CI installs the chromium package")
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], headless=True
        )
        yield chromium
        chromium.close()
