"""The per-call path keeps its guarantees with less work (GW-4, GW-5, GW-8).

Each call follows httpcore's trace only until its request is being sent, builds no httpx
timeouts of its own (its deadline bounds the whole request; the client adds the 2 s connect
limit) and drives a response's close to its end in its own task. These tests hold the
guarantees those shortcuts must keep: a hang after connecting is still "no answer", a hang
while connecting still "not reached", and a cancellation still never cuts a close short.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest

from provisioner.runtime import GatewayUnreachable, McpGatewayServer, NoAnswer
from provisioner.runtime.gateway.transport import finish_despite_cancellation

from .fault_gateway import key_of

pytestmark = pytest.mark.anyio


class TestTracingOnlyUntilSent:
    async def test_a_kept_connection_that_then_gets_no_answer_is_no_answer(
        self, scenario_base, fault_gateway
    ) -> None:
        """GW-5: after the first call the trace is no longer followed, yet the second call's
        hang, on the same socket, is told apart from a gateway not reached."""
        base = scenario_base("result-once-then-hang")
        async with McpGatewayServer(base + "/s/loom/mcp") as server:
            first = await server.call_tool("loom_search", {}, deadline_s=5)
            with pytest.raises(NoAnswer):
                await server.call_tool("loom_search", {}, deadline_s=0.3)
        assert first.data["ok"] is True
        calls = [h for h in fault_gateway.hits if h.key == key_of(base) and h.kind == "call"]
        assert len({hit.client_port for hit in calls}) == 1, "both calls on one socket"

    async def test_a_connect_that_hangs_is_still_not_reached(self, unaccepting_url) -> None:
        """GW-5: the connect events come before any other, so they are always followed."""
        async with McpGatewayServer(unaccepting_url + "/s/loom/mcp") as server:
            with pytest.raises(GatewayUnreachable, match="no connection within"):
                await server.call_tool("loom_search", {}, deadline_s=0.3)


async def closing(log: list[str], *, waits: int = 3, error: Exception | None = None) -> None:
    """A clean-up that waits on timers and on bare turns of the loop, as httpcore's close does."""
    for _ in range(waits):
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)
    if error is not None:
        raise error
    log.append("closed")


class TestCleanUpIsNeverCutShort:
    async def test_a_cancellation_during_the_clean_up_is_raised_once_it_is_over(self) -> None:
        log: list[str] = []
        task = asyncio.create_task(finish_despite_cancellation(closing(log)))
        await asyncio.sleep(0.015)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["closed"]

    async def test_a_deadline_during_the_clean_up_is_a_timeout_once_it_is_over(self) -> None:
        log: list[str] = []
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.015):
                await finish_despite_cancellation(closing(log))
        assert log == ["closed"]

    async def test_many_cancellations_still_let_the_clean_up_finish(self) -> None:
        log: list[str] = []
        task = asyncio.create_task(finish_despite_cancellation(closing(log, waits=6)))
        for _ in range(5):
            await asyncio.sleep(0.01)
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["closed"]

    async def test_an_error_of_the_clean_up_is_raised_as_it_is(self) -> None:
        with pytest.raises(OSError, match="socket"):
            await finish_despite_cancellation(closing([], error=OSError("socket gone")))

    async def test_after_a_cancellation_the_cancellation_is_what_counts(self) -> None:
        task = asyncio.create_task(
            finish_despite_cancellation(closing([], error=OSError("socket gone")))
        )
        await asyncio.sleep(0.015)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_the_clean_up_runs_in_the_callers_task(self) -> None:
        """anyio's cancel scopes, which httpcore's close enters, must be left in the task that
        entered them; a clean-up moved to another task part-way would fail there."""
        log: list[str] = []

        async def shielded() -> None:
            with anyio.CancelScope(shield=True):
                await closing(log)

        task = asyncio.create_task(finish_despite_cancellation(shielded()))
        await asyncio.sleep(0.015)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["closed"]
