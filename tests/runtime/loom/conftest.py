"""Fixtures of the Loom backend's tests: the dev gateway on loopback, a fake clock, and the
CON-2 check of every call the backend sent.

Each test gets its own dev gateway (the official ``mcp`` SDK behind the catalog, on a free
loopback port). When the test ends, every ``tools/call`` the gateway saw is held to the
contract fixture: each argument one the fixture declares, each fixed value in its set.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from tests.fakes.gateway import FakeGateway
from tests.support.clock import FakeClock
from tests.support.contract import contract_problems
from tests.support.loopback import LoopbackServer, closed_port_url


@pytest.fixture
def anyio_backend() -> str:
    """The runtime is asyncio-only (it uses ``asyncio.timeout``)."""
    return "asyncio"


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    """A dev gateway answering JSON and event streams (per call, from the seed)."""
    with serve_in_thread(seed=5, answers="mixed") as running:
        yield running
        problems = contract_problems(running.app.calls)
    assert not problems, problems


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="module")
def catalog_without_loom() -> Iterator[str]:
    """A gateway base URL whose catalog lists only another server (no ``loom`` yet)."""
    catalog = {
        "schemaVersion": 1,
        "generation": 4,
        "digest": "sha256:" + "1" * 64,
        "servers": [{"id": "github", "path": "/s/github/mcp", "tools": ["search_code"]}],
    }
    server = LoopbackServer(FakeGateway(catalog=catalog, catalog_everywhere=True), lifespan="off")
    yield server.start()
    server.stop()


@pytest.fixture
def unreachable_url() -> str:
    """A loopback base URL nothing listens on."""
    return closed_port_url()
