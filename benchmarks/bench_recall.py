"""Startup recall through the dev gateway, against the raw pack call it wraps; and its bound.

Starts ``nerve dev gateway --port 0`` in a child process (the official ``mcp`` SDK server with
the Loom stand-in), stores a few memories, then times, session by session and interleaved so
both see the same machine load:

* raw: ``httpx.AsyncClient.post`` of the ``loom_context_pack`` call on one kept client, with
  the JSON body decoded;
* recall: ``LoomMemory.startup_recall`` of a new session on one kept backend (the frozen
  lookup, catalog check, breaker, deadline, answer sorting, contract reads, sanitizing; the
  freeze is handed to the state's worker thread after the recall answers).

The state is in memory, or with ``--state file`` a state file in a fresh temporary folder, as
Nerve keeps it (the lookup then reads through the recall's own read-only connection). It
prints both medians and their ratio (target: at most 1.10). Then it switches the gateway's
faults to ``hang`` and times whole recalls on fresh backends: each must give up and answer
"could not be recalled" within the 5 s read (target: at most 5.05 s of wall time).

    python benchmarks/bench_recall.py [--sessions 500] [--hang-runs 3] [--answers json|sse]
                                      [--state memory|file]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from provisioner.runtime.gateway.protocol import REQUEST_HEADERS
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.state import StateStore

MCP_PATH = "/s/loom/mcp"
MEMORIES = 12
WARM_UP_SESSIONS = 30
TARGET_RATIO = 1.10
TARGET_HANG_S = 5.05


@dataclass(frozen=True)
class BenchLoom:
    """What ``LoomMemory.from_config`` reads of a configuration."""

    org: str | None = None
    namespace: str | None = None
    defer_extraction: bool = False
    sweep_concurrency: int | None = None


@dataclass(frozen=True)
class BenchConfig:
    mcp_gateway_url: str
    memory_backend: str = "loom"
    loom: BenchLoom = BenchLoom()


def start_gateway(answers: str) -> tuple[subprocess.Popen[str], str]:
    """The dev gateway in a child process, and the base URL from its first line."""
    command = [sys.executable, "-m", "provisioner", "dev", "gateway", "--port", "0"]
    gateway = subprocess.Popen(
        [*command, "--answers", answers],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert gateway.stdout is not None
    line = gateway.stdout.readline().strip()
    if not line.startswith("mcp_gateway_url: http://127.0.0.1:"):
        gateway.kill()
        raise SystemExit(f"the dev gateway did not start (it printed {line!r})")
    return gateway, line.split(": ", 1)[1]


def call_body(request_id: int, tool: str, arguments: dict) -> bytes:
    request = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return json.dumps(request, separators=(",", ":")).encode()


async def store_memories(client: httpx.AsyncClient, url: str) -> None:
    for number in range(MEMORIES):
        text = f"fact {number}: the user prefers <short> answers & plain words"
        body = call_body(number + 1, "loom_memory_set", {"text": text})
        (await client.post(url, content=body, headers=REQUEST_HEADERS)).raise_for_status()


async def time_raw(client: httpx.AsyncClient, url: str, request_id: int) -> float:
    body = call_body(request_id, "loom_context_pack", {"mode": "startup", "sections": ["memories"]})
    started = time.perf_counter()
    response = await client.post(url, content=body, headers=REQUEST_HEADERS)
    response.raise_for_status()
    if response.headers["content-type"].startswith("application/json"):
        response.json()
    return time.perf_counter() - started


async def time_recall(memory: LoomMemory, session: str) -> float:
    started = time.perf_counter()
    recall = await memory.startup_recall(session)
    elapsed = time.perf_counter() - started
    if not recall.recalled or not recall.items:
        raise SystemExit(f"the recall of {session} failed: {memory.diagnostics()['last_error']}")
    return elapsed


async def measure(base: str, sessions: int, state_path: str) -> tuple[list[float], list[float]]:
    """Per-session seconds for the raw pack POST and for ``startup_recall``, interleaved."""
    url = base + MCP_PATH
    raw, ours = [], []
    async with httpx.AsyncClient(trust_env=False) as client:
        await store_memories(client, url)
        with StateStore(state_path) as state:
            async with LoomMemory.from_config(BenchConfig(base), state=state) as memory:
                for number in range(WARM_UP_SESSIONS + sessions):
                    session = f"bench-{number}"
                    if number % 2:  # alternate which goes first
                        raw_s = await time_raw(client, url, number + 1000)
                        ours_s = await time_recall(memory, session)
                    else:
                        ours_s = await time_recall(memory, session)
                        raw_s = await time_raw(client, url, number + 1000)
                    if number >= WARM_UP_SESSIONS:
                        raw.append(raw_s)
                        ours.append(ours_s)
    return raw, ours


async def measure_hang(base: str, runs: int) -> list[float]:
    """Wall seconds of whole recalls while the gateway hangs, each on a fresh backend."""
    async with httpx.AsyncClient(trust_env=False) as client:
        switched = await client.post(f"{base}/_dev/faults", json={"faults": "hang"})
        switched.raise_for_status()
    times = []
    for run in range(runs):
        async with LoomMemory.from_config(BenchConfig(base)) as memory:
            started = time.perf_counter()
            recall = await memory.startup_recall(f"hang-{run}")
            times.append(time.perf_counter() - started)
        if recall.recalled:
            raise SystemExit("a recall against a hanging gateway answered memories")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500, help="timed sessions of each kind")
    parser.add_argument("--hang-runs", type=int, default=3, help="recalls against a hang")
    parser.add_argument("--answers", choices=("json", "sse"), default="json")
    parser.add_argument("--state", choices=("memory", "file"), default="memory")
    args = parser.parse_args()
    gateway, base = start_gateway(args.answers)
    try:
        with tempfile.TemporaryDirectory() as folder:
            state_path = str(Path(folder, "state.sqlite3")) if args.state == "file" else ":memory:"
            raw, ours = asyncio.run(measure(base, args.sessions, state_path))
        hangs = asyncio.run(measure_hang(base, args.hang_runs)) if args.hang_runs else []
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
    raw_ms, ours_ms = statistics.median(raw) * 1000, statistics.median(ours) * 1000
    print(f"dev gateway answering {args.answers}, {args.sessions} sessions each")
    print(f"state:                      {args.state}")
    print(f"raw pack POST, median:      {raw_ms:.3f} ms")
    print(f"startup_recall, median:     {ours_ms:.3f} ms")
    print(f"ratio:                      {ours_ms / raw_ms:.3f} (target: at most {TARGET_RATIO})")
    if hangs:
        worst = max(hangs)
        listed = ", ".join(f"{seconds:.3f}" for seconds in hangs)
        print(f"recall against a hang, s:   {listed} (target: at most {TARGET_HANG_S})")
        print(f"worst:                      {worst:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
