"""A transport on which a call's deadline strikes only once the gateway has the request.

A hanging gateway and a real deadline of a few milliseconds race on a loaded machine: the
deadline may strike while the request is still being connected or written, so the gateway
never sees it, or sees it after the test has counted, and a connect cut short is "unreachable"
rather than "no answer". Tests about what an unanswered call leads to (the breaker, the
catalog reads it allows) fix that order instead of hoping for it: the request goes out on
httpx's own network transport to the real loopback gateway, and once the gateway has recorded
it, the wait for the answer ends in the ``TimeoutError`` that ``asyncio.timeout`` raises when a
call's deadline strikes. The client then hangs up, as it does when its own deadline strikes.

The call's real deadline is then only a guard (``GUARD_DEADLINE_S``) that a test passes so a
request the gateway never records fails the test instead of holding it.
"""

from __future__ import annotations

import asyncio

import httpx

from .fault_gateway import FaultGateway
from .tracking import TLS

GUARD_DEADLINE_S = 30.0  # a guard against a hung test, never what ends a call here
POLL_S = 0.001  # how often the gateway's record is looked at while the request travels


class DeadlineAfterArrival(httpx.AsyncHTTPTransport):
    """httpx's network transport, ending each tools/call once the gateway under ``key`` has it.

    ``arrived`` counts the requests that reached the gateway and then met their deadline. An
    answer that comes before the gateway's record of the request is returned as it is.
    """

    def __init__(self, gateway: FaultGateway, key: str) -> None:
        super().__init__(verify=TLS, trust_env=False)
        self._gateway = gateway
        self._key = key
        self.arrived = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        seen = self._gateway.count(self._key, "call")
        sending = asyncio.create_task(super().handle_async_request(request))
        while self._gateway.count(self._key, "call") == seen:
            if sending.done():
                return sending.result()
            await asyncio.sleep(POLL_S)
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
        self.arrived += 1
        raise TimeoutError("the call's deadline struck after the gateway had the request")
