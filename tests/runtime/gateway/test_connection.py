"""One kept client per Loom URL, replaced only when the catalog names another (GW-8)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from provisioner.runtime.gateway.catalog import (
    CATALOG_MIN_INTERVAL_S,
    GatewayCatalog,
    parse_catalog,
)
from provisioner.runtime.gateway.client import LoomConnection
from provisioner.runtime.gateway.errors import (
    CatalogError,
    CircuitOpen,
    ClientClosed,
    GatewayError,
    NoAnswer,
    PolicyRefused,
    ServerNotListed,
)

from .deadline_after_arrival import GUARD_DEADLINE_S, DeadlineAfterArrival
from .fault_gateway import FaultGateway, catalog_payload, key_of
from .tracking import TransportLog

pytestmark = pytest.mark.anyio

SHORT_WAIT_S = 0.05  # a call's deadline with too little left to wait for a catalog read


class SwitchableCatalog:
    """A catalog source whose gateway base URL a test can change between calls.

    The catalogs are real ``parse_catalog`` results; only the choice of base URL is the test's.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.last_error = None

    async def current(self, *, deadline_s: float = 5.0):
        return parse_catalog(catalog_payload(), self.base)


def hung_up(gateway: FaultGateway, base: str) -> Callable[[], DeadlineAfterArrival]:
    """A ``transport_factory`` whose calls under ``base`` meet their deadline once the gateway
    has them (``DeadlineAfterArrival``), as a call to a gateway that never answers does."""
    return lambda: DeadlineAfterArrival(gateway, key_of(base))


class TestKeptClient:
    async def test_a_policy_refusal_keeps_the_client(self, scenario_base, fault_gateway) -> None:
        """GW-8: "no credential set yet" on every call must not cost a client each time."""
        base = scenario_base("policy")
        catalog = GatewayCatalog(base)
        connection = LoomConnection(catalog)
        servers = set()
        for _ in range(5):
            with pytest.raises(PolicyRefused):
                await connection.call_tool("loom_search", {"query": "x"}, deadline_s=2)
            servers.add(connection.server)
        await connection.aclose()
        await catalog.aclose()
        [server] = servers
        calls = [
            hit for hit in fault_gateway.hits if hit.key == key_of(base) and hit.kind == "call"
        ]
        assert len(calls) == 5
        assert len({hit.client_port for hit in calls}) == 1, "one socket, kept alive"
        assert server.closed

    async def test_the_catalog_is_read_again_after_30_seconds(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        base = scenario_base("policy")
        catalog = GatewayCatalog(base, clock=clock)
        connection = LoomConnection(catalog, clock=clock)
        for _ in range(4):
            with pytest.raises(PolicyRefused):
                await connection.call_tool("loom_search", {}, deadline_s=2)
            clock.advance(CATALOG_MIN_INTERVAL_S / 2)
        first = connection.server
        await connection.aclose()
        await catalog.aclose()
        assert fault_gateway.count(key_of(base), "catalog") == 2
        assert first.closed


async def _switch_url_during_a_slow_call(scenario_base):  # type: ignore[no-untyped-def]
    """A slow call on the first URL; the catalog then names another and a call goes there.

    The slow call's answer is held until the test lets it go (``fault_gateway.release`` of the
    returned key), so it is still running however long the second call takes. Returns the
    connection, the first (now retired) client, the still-running slow call and its key.
    """
    slow_base = scenario_base("held")
    catalog = SwitchableCatalog(slow_base)
    connection = LoomConnection(catalog)
    slow_call = asyncio.create_task(
        connection.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
    )
    while connection.server is None:
        await asyncio.sleep(0.01)
    old = connection.server
    catalog.base = scenario_base("result")
    await connection.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
    return connection, old, slow_call, key_of(slow_base)


class TestReplacedClient:
    async def test_another_url_replaces_the_client_and_closes_the_old_one(
        self, scenario_base
    ) -> None:
        catalog = SwitchableCatalog(scenario_base("result"))
        connection = LoomConnection(catalog)
        await connection.call_tool("loom_search", {}, deadline_s=2)
        old = connection.server
        catalog.base = scenario_base("result")
        await connection.call_tool("loom_search", {}, deadline_s=2)
        assert connection.server is not old and old.closed
        assert connection.server.url == catalog.base + "/s/loom/mcp"
        await connection.aclose()

    async def test_the_old_client_closes_only_when_its_last_call_ends(
        self, scenario_base, fault_gateway
    ) -> None:
        connection, old, slow_call, slow = await _switch_url_during_a_slow_call(scenario_base)
        assert not old.closed and connection.retired == (old,)
        fault_gateway.release(slow)
        result = await slow_call
        assert result.data["ok"] is True
        assert old.closed and connection.retired == ()
        await connection.aclose()

    async def test_shutdown_closes_every_client_even_mid_call(self, scenario_base) -> None:
        connection, old, slow_call, _slow = await _switch_url_during_a_slow_call(scenario_base)
        current = connection.server
        await connection.aclose()
        assert old.closed and current.closed
        [ended] = await asyncio.gather(slow_call, return_exceptions=True)
        assert isinstance(ended, GatewayError), "the cut-off call ends in an outcome"
        with pytest.raises(RuntimeError):
            await connection.call_tool("loom_search", {}, deadline_s=2)


class TestBeforeTheCall:
    async def test_a_catalog_without_loom_is_server_not_listed(self, scenario_base) -> None:
        catalog = GatewayCatalog(scenario_base("catalog-no-loom"))
        connection = LoomConnection(catalog)
        with pytest.raises(ServerNotListed):
            await connection.call_tool("loom_search", {}, deadline_s=2)
        assert connection.server is None
        await catalog.aclose()

    async def test_no_catalog_at_all_names_why(self, scenario_base) -> None:
        catalog = GatewayCatalog(scenario_base("catalog-503"))
        connection = LoomConnection(catalog)
        with pytest.raises(CatalogError) as caught:
            await connection.call_tool("loom_search", {}, deadline_s=2)
        assert type(caught.value) is CatalogError
        assert caught.value.reason == "http_503"
        assert caught.value.gateway_reason == "upstream_unavailable"
        await catalog.aclose()

    async def test_an_open_breaker_fails_before_the_catalog_is_read(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        """GW-7: while open, nothing at all goes on the wire, not even a catalog read.

        Each call the gateway leaves unanswered ends once the gateway has it (``hung_up``), so
        every request of the three is counted before the breaker's open call is looked at.
        """
        base = scenario_base("hang")
        catalog = GatewayCatalog(base, clock=clock)
        connection = LoomConnection(
            catalog, clock=clock, transport_factory=hung_up(fault_gateway, base)
        )
        assert await catalog.current() is not None
        for wait_s in (0, 15, 30):  # the breaker opens for 15 s, then 30 s, then 60 s
            clock.advance(wait_s)
            with pytest.raises(NoAnswer):
                await connection.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
        assert fault_gateway.count(key_of(base), "call") == 3
        clock.advance(CATALOG_MIN_INTERVAL_S)  # a catalog read is due, the breaker still open
        before = fault_gateway.count(key_of(base))
        with pytest.raises(CircuitOpen):
            await connection.call_tool("loom_search", {}, deadline_s=1)
        assert fault_gateway.count(key_of(base)) == before
        await connection.aclose()
        await catalog.aclose()


class TestOutage:
    async def test_a_ten_minute_outage_costs_6_calls_and_5_catalog_reads(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        """GW-2, GW-7: after one good catalog the gateway fails everything for 10 minutes.

        A session start every 2 s asks for a call. Calls reach the gateway at 0, 16, 46, 106,
        226 and 466 s (the breaker's 15, 30, 60, 120, 240 s); while it is open the catalog is
        not read either, so reads come with those calls, once 30 s have passed since the last.
        Each call the gateway leaves unanswered ends once the gateway has it (``hung_up``), and
        each due catalog read is waited for, so every request is counted, on a machine of any
        speed, before the next session start.
        """
        base = scenario_base("outage-after-catalog")
        catalog = GatewayCatalog(base, clock=clock)
        connection = LoomConnection(
            catalog, clock=clock, transport_factory=hung_up(fault_gateway, base)
        )
        assert await catalog.current() is not None  # the read at 0 s
        outcomes = []
        for _ in range(0, 601, 2):
            with pytest.raises((NoAnswer, CircuitOpen)) as caught:
                await connection.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
            outcomes.append(type(caught.value))
            clock.advance(2)
        await connection.aclose()
        await catalog.aclose()
        assert fault_gateway.count(key_of(base), "call") == 6
        assert outcomes.count(NoAnswer) == 6, "every call let through met its deadline"
        assert fault_gateway.count(key_of(base), "catalog") == 5
        assert catalog.latest is not None, "the catalog read before the outage is kept"

    async def test_a_deadline_must_be_positive(self, scenario_base, fault_gateway) -> None:
        base = scenario_base("result")
        catalog = GatewayCatalog(base)
        connection = LoomConnection(catalog)
        with pytest.raises(ValueError):
            await connection.call_tool("loom_search", {}, deadline_s=0)
        await catalog.aclose()
        assert fault_gateway.count(key_of(base)) == 0, "a bad deadline spends no catalog read"


class YieldingCatalog(SwitchableCatalog):
    """A switchable catalog whose answer takes one turn of the event loop, as a read may."""

    async def current(self, *, deadline_s: float = 5.0):
        await asyncio.sleep(0)
        return await super().current(deadline_s=deadline_s)


class TestReplacementRaces:
    """Defect: clients leaked when calls and a URL change or a shutdown met (GW-8)."""

    async def test_two_calls_after_a_url_change_share_one_new_client(self, scenario_base) -> None:
        built = TransportLog()
        catalog = YieldingCatalog(scenario_base("result"))
        connection = LoomConnection(catalog, transport_factory=built)
        await connection.call_tool("loom_search", {}, deadline_s=2)
        catalog.base = scenario_base("result")
        await asyncio.gather(
            *(connection.call_tool("loom_search", {}, deadline_s=2) for _ in range(2))
        )
        assert len(built.built) == 2, "one client per URL"
        assert connection.retired == ()
        await connection.aclose()
        assert built.all_closed

    async def test_a_shutdown_while_a_call_waits_for_the_catalog_builds_no_client(
        self, scenario_base, fault_gateway
    ) -> None:
        base = scenario_base("catalog-held")  # the read is answered once the shutdown is done
        built = TransportLog()
        catalog = GatewayCatalog(base)
        connection = LoomConnection(catalog, transport_factory=built)
        call = asyncio.create_task(
            connection.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
        )
        while fault_gateway.count(key_of(base), "catalog") == 0:  # the read is under way
            await asyncio.sleep(0.005)
        await connection.aclose()
        fault_gateway.release(key_of(base))
        with pytest.raises(ClientClosed):
            await call
        await catalog.aclose()
        assert connection.server is None and built.built == []
        assert fault_gateway.count(key_of(base), "call") == 0


class TestColdStart:
    """Defect: calls that arrived during the first catalog read found no catalog (GW-2)."""

    async def test_ten_calls_at_once_before_any_catalog_share_its_one_read(
        self, scenario_base, fault_gateway
    ) -> None:
        """The read is held until the ten calls are all waiting for it."""
        base = scenario_base("catalog-held")
        catalog = GatewayCatalog(base)
        connection = LoomConnection(catalog)
        try:
            calls = asyncio.gather(
                *(
                    connection.call_tool("loom_search", {"n": n}, deadline_s=GUARD_DEADLINE_S)
                    for n in range(10)
                )
            )
            while fault_gateway.count(key_of(base), "catalog") == 0:  # the read is under way
                await asyncio.sleep(0.005)
            fault_gateway.release(key_of(base))
            results = await calls
        finally:
            await connection.aclose()
            await catalog.aclose()
        assert [result.data["arguments"]["n"] for result in results] == list(range(10))
        assert fault_gateway.count(key_of(base), "catalog") == 1

    async def test_a_call_with_little_time_left_does_not_spend_the_read(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        """The read has its own 5 s; the next call, seconds later, gets what it read.

        The read is held until the first call has given up on it, so that call always meets a
        read still under way, however long its own short wait lasts on a busy machine."""
        base = scenario_base("catalog-held")
        async with (
            GatewayCatalog(base, clock=clock) as catalog,
            LoomConnection(catalog, clock=clock) as connection,
        ):
            with pytest.raises(NoAnswer):
                await connection.call_tool("loom_search", {}, deadline_s=SHORT_WAIT_S)
            fault_gateway.release(key_of(base))
            clock.advance(1)
            result = await connection.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
        assert result.data["ok"] is True
        assert fault_gateway.count(key_of(base), "catalog") == 1
