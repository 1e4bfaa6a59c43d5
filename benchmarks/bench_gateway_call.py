"""What ``McpGatewayServer.call_tool`` costs on top of a raw HTTP POST of the same request.

Starts the test suite's SDK peer (the official ``mcp`` server behind its catalog app) in a
child process on a loopback port, then times, call by call and interleaved so that both see
the same machine load:

* raw: ``httpx.AsyncClient.post`` of the ``tools/call`` request on one kept client, body read;
* client: ``McpGatewayServer.call_tool`` of the same tool and arguments on one kept server
  (breaker, deadline, answer sorting and result parsing included).

It prints both medians and the client's overhead in percent. The target is 15 % or less.

With ``--concurrent N`` it times waves instead: N raw POSTs at once on one kept client, then
N ``call_tool`` calls at once on one kept server (alternating which wave goes first), and
prints the median wave of each and their ratio.

    python benchmarks/bench_gateway_call.py [--calls 1000] [--sse] [--concurrent 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from provisioner.runtime.gateway.client import REQUEST_HEADERS, McpGatewayServer

PEER = Path(__file__).resolve().parent.parent / "testbed" / "sdk_peer.py"
MCP_PATH = "/s/loom/mcp"
TOOL = "loom_search"
ARGUMENTS = {"query": "tea", "top_k": 3}
WARM_UP_CALLS = 50
WARM_UP_WAVES = 3
TARGET_OVERHEAD_PERCENT = 15.0


def start_peer(sse: bool) -> tuple[subprocess.Popen[str], str]:
    """The SDK peer in a child process, and the base URL it printed once listening."""
    command = [sys.executable, str(PEER), *(["--sse"] if sse else [])]
    peer = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert peer.stdout is not None
    base = peer.stdout.readline().strip()
    if not base.startswith("http://127.0.0.1:"):
        peer.kill()
        raise SystemExit(f"the SDK peer did not start (it printed {base!r})")
    return peer, base


def request_body(request_id: int) -> bytes:
    request = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": TOOL, "arguments": ARGUMENTS},
    }
    return json.dumps(request, separators=(",", ":")).encode()


async def time_raw(client: httpx.AsyncClient, url: str, request_id: int) -> float:
    started = time.perf_counter()
    response = await client.post(url, content=request_body(request_id), headers=REQUEST_HEADERS)
    response.raise_for_status()
    return time.perf_counter() - started


async def time_client(server: McpGatewayServer) -> float:
    started = time.perf_counter()
    await server.call_tool(TOOL, ARGUMENTS, deadline_s=10)
    return time.perf_counter() - started


async def measure(base: str, calls: int) -> tuple[list[float], list[float]]:
    """Per-call seconds for the raw POST and for ``call_tool``, interleaved call by call."""
    url = base + MCP_PATH
    raw, ours = [], []
    async with httpx.AsyncClient(trust_env=False) as client, McpGatewayServer(url) as server:
        for number in range(WARM_UP_CALLS + calls):
            if number % 2:  # alternate which goes first, so neither gets the warmer turn
                raw_s = await time_raw(client, url, number + 1)
                ours_s = await time_client(server)
            else:
                ours_s = await time_client(server)
                raw_s = await time_raw(client, url, number + 1)
            if number >= WARM_UP_CALLS:
                raw.append(raw_s)
                ours.append(ours_s)
    return raw, ours


async def time_raw_wave(client: httpx.AsyncClient, url: str, size: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(time_raw(client, url, number + 1) for number in range(size)))
    return time.perf_counter() - started


async def time_client_wave(server: McpGatewayServer, size: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(time_client(server) for _ in range(size)))
    return time.perf_counter() - started


async def measure_waves(base: str, waves: int, size: int) -> tuple[list[float], list[float]]:
    """Seconds per wave of ``size`` concurrent raw POSTs and of ``size`` concurrent calls."""
    url = base + MCP_PATH
    raw, ours = [], []
    async with (
        httpx.AsyncClient(trust_env=False) as client,
        McpGatewayServer(url) as server,
    ):
        for number in range(WARM_UP_WAVES + waves):
            if number % 2:
                raw_s = await time_raw_wave(client, url, size)
                ours_s = await time_client_wave(server, size)
            else:
                ours_s = await time_client_wave(server, size)
                raw_s = await time_raw_wave(client, url, size)
            if number >= WARM_UP_WAVES:
                raw.append(raw_s)
                ours.append(ours_s)
    return raw, ours


def report(mode: str, count: str, raw: list[float], ours: list[float], what: str) -> None:
    raw_ms, ours_ms = statistics.median(raw) * 1000, statistics.median(ours) * 1000
    overhead = (ours_ms - raw_ms) / raw_ms * 100
    print(f"SDK peer answering {mode}, {count}")
    print(f"raw httpx POST{what}, median:  {raw_ms:.3f} ms")
    print(f"call_tool{what}, median:       {ours_ms:.3f} ms")
    target = f"target: at most {TARGET_OVERHEAD_PERCENT:g} %"
    print(f"overhead (ratio {ours_ms / raw_ms:.3f}):  {overhead:+.1f} % ({target})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls (or waves)")
    parser.add_argument("--sse", action="store_true", help="the peer answers event streams")
    parser.add_argument("--concurrent", type=int, default=0, help="time waves of N calls")
    args = parser.parse_args()
    mode = "event stream" if args.sse else "JSON"
    peer, base = start_peer(args.sse)
    try:
        if args.concurrent:
            waves = max(args.calls // args.concurrent, 5)
            raw, ours = asyncio.run(measure_waves(base, waves, args.concurrent))
            count = f"{waves} waves of {args.concurrent} concurrent calls each"
            report(mode, count, raw, ours, f" x{args.concurrent}")
        else:
            raw, ours = asyncio.run(measure(base, args.calls))
            report(mode, f"{args.calls} calls each", raw, ours, "")
    finally:
        peer.terminate()
        peer.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
