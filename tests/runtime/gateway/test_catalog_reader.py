"""Reading GET /catalog from a real loopback gateway (GW-2)."""

from __future__ import annotations

import httpx
import pytest

from provisioner.runtime.gateway.catalog import (
    CATALOG_DEADLINE_S,
    CATALOG_MIN_INTERVAL_S,
    GatewayCatalog,
)
from provisioner.runtime.gateway.errors import CatalogError
from provisioner.runtime.gateway.transport import KeptConnectionClosed

from .fault_gateway import CLIENT_LEFT, REQUEST_ID, key_of

pytestmark = pytest.mark.anyio


async def read_once(base: str, *, deadline_s: float = 5.0):
    """One read of a fresh reader: (catalog or None, last error or None)."""
    catalog = GatewayCatalog(base)
    try:
        return await catalog.current(deadline_s=deadline_s), catalog.last_error
    finally:
        await catalog.aclose()


class TestCatalogReads:
    async def test_a_good_catalog_is_read_and_lists_loom(self, scenario_base) -> None:
        catalog, error = await read_once(scenario_base("catalog-ok"))
        assert error is None
        assert catalog.require("loom").url == catalog.base_url + "/s/loom/mcp"

    async def test_a_catalog_of_8_mib_is_accepted(self, scenario_base) -> None:
        catalog, error = await read_once(scenario_base("catalog-at-limit"))
        assert error is None and catalog.lists("loom")

    @pytest.mark.parametrize("scenario", ["catalog-huge", "catalog-huge-declared"])
    async def test_a_catalog_of_8_mib_and_one_byte_is_refused(
        self, scenario_base, scenario
    ) -> None:
        """GW-2: the cap holds with and without a Content-Length to warn the reader."""
        catalog, error = await read_once(scenario_base(scenario))
        assert catalog is None and error.reason == "too_large"

    @pytest.mark.parametrize(
        ("scenario", "reason"),
        [
            ("catalog-invalid", "invalid"),
            ("catalog-text", "not_json"),
            ("catalog-duplicate-keys", "not_json"),
            ("catalog-redirect", "http_307"),
        ],
    )
    async def test_a_bad_answer_is_not_applied(self, scenario_base, scenario, reason) -> None:
        catalog, error = await read_once(scenario_base(scenario))
        assert catalog is None and error.reason == reason

    @pytest.mark.parametrize(
        ("scenario", "reason"),
        [("catalog-deep", "not_json"), ("catalog-deep-envelope", "http_503")],
    )
    async def test_json_nested_too_deep_to_decode_is_a_failed_read(
        self, scenario_base, scenario, reason
    ) -> None:
        """Defect: 100k nested brackets raised RecursionError out of a reader that never raises."""
        catalog, error = await read_once(scenario_base(scenario))
        assert catalog is None and error.reason == reason
        assert error.gateway_reason is None

    async def test_a_redirect_is_not_followed(self, scenario_base, fault_gateway) -> None:
        base = scenario_base("catalog-redirect")
        before = len(fault_gateway.hits)
        await read_once(base)
        assert [hit.key for hit in fault_gateway.hits[before:]] == [key_of(base)]

    async def test_an_error_envelope_gives_only_its_well_shaped_values(self, scenario_base) -> None:
        _, error = await read_once(scenario_base("catalog-503"))
        assert (error.reason, error.gateway_reason, error.request_id) == (
            "http_503",
            "upstream_unavailable",
            REQUEST_ID,
        )
        assert "SECRET" not in str(error)

    async def test_an_odd_envelope_puts_nothing_into_the_error(self, scenario_base) -> None:
        _, error = await read_once(scenario_base("catalog-odd-envelope"))
        assert error.gateway_reason is None and error.request_id is None
        assert "INJECTED" not in str(error)

    async def test_a_hanging_gateway_costs_a_caller_no_more_than_its_deadline(
        self, scenario_base, fault_gateway
    ) -> None:
        """GW-2: the caller stops waiting; the read goes on, on its own budget.

        The read still under way when the caller has its answer shows the caller did not wait
        for it; closing the reader hangs up on the gateway rather than waiting its hang out.
        """
        base = scenario_base("catalog-hang")
        catalog = GatewayCatalog(base)
        assert await catalog.current(deadline_s=0.2) is None
        assert catalog.reading and catalog.last_error is None
        await catalog.aclose()
        assert fault_gateway.ending(key_of(base)) == CLIENT_LEFT
        assert not catalog.reading

    @pytest.mark.slow
    async def test_a_read_gives_up_after_its_own_5_seconds(self, silent_url) -> None:
        """GW-2: a gateway that accepts the connection and never answers costs one read 5 s."""
        catalog, error = await read_once(silent_url, deadline_s=2 * CATALOG_DEADLINE_S)
        assert catalog is None and error.reason == "timeout"
        assert f"{CATALOG_DEADLINE_S:g} s" in error.message

    async def test_a_closed_port_is_unreachable(self, refused_url) -> None:
        catalog, error = await read_once(refused_url)
        assert catalog is None and error.reason == "unreachable"

    async def test_proxy_settings_in_the_environment_are_ignored(
        self, scenario_base, refused_url, monkeypatch
    ) -> None:
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, refused_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        catalog, error = await read_once(scenario_base("catalog-ok"))
        assert error is None and catalog.lists("loom")


class TestCatalogThrottle:
    async def test_reads_come_at_most_every_30_seconds(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        base = scenario_base("catalog-ok")
        catalog = GatewayCatalog(base, clock=clock)
        for _ in range(10):
            await catalog.current()
            clock.advance(CATALOG_MIN_INTERVAL_S / 4)
        await catalog.aclose()
        assert fault_gateway.count(key_of(base), "catalog") == 3  # at 0, 30 and 60 s

    async def test_a_ten_minute_outage_costs_at_most_21_reads(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        """GW-2: the throttle holds while no catalog can be read; one read per 30 s."""
        base = scenario_base("outage")
        catalog = GatewayCatalog(base, clock=clock)
        for _ in range(0, 601, 2):
            assert await catalog.current() is None
            clock.advance(2)
        await catalog.aclose()
        assert fault_gateway.count(key_of(base), "catalog") == 21
        assert catalog.last_error.reason == "http_503"

    async def test_the_last_good_catalog_stays_when_reads_fail(self, scenario_base, clock) -> None:
        catalog = GatewayCatalog(scenario_base("catalog-once"), clock=clock)
        first = await catalog.current()
        clock.advance(CATALOG_MIN_INTERVAL_S)
        again = await catalog.current()
        await catalog.aclose()
        assert first is not None and again is first
        assert catalog.last_error.reason == "http_503"


class ConnectionsFoundClosed(httpx.AsyncBaseTransport):
    """A transport whose every kept connection the gateway closed before the request went out,
    on the resend too: what the connection guard raises then (near-unreachable on a real
    pool, since the resend goes on a fresh connection)."""

    def __init__(self) -> None:
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        raise KeptConnectionClosed("the gateway had closed the kept-alive connection")


class TestAConnectionFoundClosedTwice:
    async def test_is_a_catalog_error_saying_the_gateway_was_not_reached(self) -> None:
        """Before, the guard's own error left the reader as itself: the read task failed with
        no last error kept, and status showed nothing wrong."""
        transport = ConnectionsFoundClosed()
        catalog = GatewayCatalog("http://127.0.0.1:9", transport=transport)
        try:
            assert await catalog.current(deadline_s=5.0) is None
            error = catalog.last_error
        finally:
            await catalog.aclose()
        assert isinstance(error, CatalogError)
        assert error.reason == "unreachable"
        assert "not reached" in str(error)
        assert transport.requests == 2, "sent once more, as the guard does, then given up"
