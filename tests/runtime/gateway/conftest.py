"""Fixtures of the gateway client's tests: real loopback servers, a fake clock and sleep.

Servers run in background threads on 127.0.0.1 with port 0 and live for the whole session, so
starting them costs once. Nothing here reaches past loopback.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from testbed.sdk_peer import PeerApp
from tests.support.clock import FakeClock, FakeSleep
from tests.support.loopback import LoopbackServer, SilentListener, closed_port_url

from .fault_gateway import FaultGateway


@pytest.fixture
def anyio_backend() -> str:
    """The runtime is asyncio-only (it uses ``asyncio.timeout``)."""
    return "asyncio"


@pytest.fixture(scope="session")
def fault_gateway() -> Iterator[FaultGateway]:
    """The fault gateway; ``fault_gateway.base_url`` is its root."""
    app = FaultGateway()
    server = LoopbackServer(app, date_header=False, server_header=False)
    app.base_url = server.start()
    yield app
    server.stop()


@pytest.fixture
def scenario_base(fault_gateway: FaultGateway):
    """``scenario_base("policy")`` is a fresh gateway base URL answering that scenario."""

    def base(scenario: str) -> str:
        return f"{fault_gateway.base_url}/{scenario}/{uuid.uuid4().hex[:12]}"

    return base


# uvicorn drops a connection idle for 5 s. On a loaded CI machine its thread can be starved
# that long between two waves of calls, and a connection dropped just as the client reuses it
# is a race the client cannot tell from a broken answer; the peers keep connections longer.
PEER_KEEP_ALIVE_S = 60


@pytest.fixture(scope="session")
def sdk_json_peer() -> Iterator[tuple[str, PeerApp]]:
    """The SDK server answering JSON bodies, behind its catalog app: (base URL, app)."""
    app = PeerApp(json_response=True)
    server = LoopbackServer(app, timeout_keep_alive=PEER_KEEP_ALIVE_S)
    yield server.start(), app
    server.stop()


@pytest.fixture(scope="session")
def sdk_sse_peer() -> Iterator[tuple[str, PeerApp]]:
    """The SDK server answering event streams, behind its catalog app: (base URL, app)."""
    app = PeerApp(json_response=False)
    server = LoopbackServer(app, timeout_keep_alive=PEER_KEEP_ALIVE_S)
    yield server.start(), app
    server.stop()


@pytest.fixture(params=["json", "sse"])
def sdk_peer(request: pytest.FixtureRequest) -> tuple[str, PeerApp]:
    """Each SDK answer mode in turn."""
    return request.getfixturevalue(f"sdk_{request.param}_peer")


@pytest.fixture
def refused_url() -> str:
    """A loopback base URL where connections are refused."""
    return closed_port_url()


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A loopback base URL that accepts connections and never answers."""
    listener = SilentListener()
    yield listener.base_url
    listener.close()


@pytest.fixture
def unaccepting_url() -> Iterator[str]:
    """A loopback base URL where connecting hangs: the listener's backlog is full."""
    listener = SilentListener()
    listener.fill_backlog()
    yield listener.base_url
    listener.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleep(clock: FakeClock) -> FakeSleep:
    return FakeSleep(clock)
