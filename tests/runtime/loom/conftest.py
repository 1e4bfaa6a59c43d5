"""Fixtures of the Loom backend's tests: the dev gateway on loopback, a configuration that
points at it, a fake clock, and the CON-2 check of every call the backend sent.

Each test gets its own dev gateway (the official ``mcp`` SDK behind the catalog, on a free
loopback port). When the test ends, every ``tools/call`` the gateway saw is held to the
contract fixture: each argument one the fixture declares, each fixed value in its set.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.config.loader import Config, load_config
from provisioner.devgateway import RunningGateway, SeenCall, serve_in_thread

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXTURE = json.loads(
    (REPO_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json").read_text(encoding="utf-8")
)


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


def loom_config(
    tmp_path: Path,
    gateway_url: str | None,
    *,
    org: str | None = None,
    namespace: str | None = None,
) -> Config:
    """A real configuration (config.local.yaml in a fresh folder) for the Loom backend."""
    config_dir = tmp_path / "config"
    config_dir.mkdir(exist_ok=True)
    lines = ["memory:", "  backend: loom"]
    loom = {"org": org, "namespace": namespace}
    if any(loom.values()):
        lines.append("  loom:")
        lines += [f"    {key}: {value}" for key, value in loom.items() if value]
    lines.append(f"mcp_gateway_url: {gateway_url or ''}")
    (config_dir / "config.local.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_config(config_dir, None, env={})


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# --- CON-2: every call on the wire against the fixture ------------------------------------------


def contract_problems(calls: Any) -> list[str]:
    """What each ``SeenCall`` sent that the fixture does not declare (empty when all is well)."""
    by_tool = {entry["tool"]: entry for entry in FIXTURE["ops"].values()}
    problems = []
    for call in calls:
        problems += call_problems(call, by_tool)
    return problems


def call_problems(call: SeenCall, by_tool: dict[str, Any]) -> list[str]:
    entry = by_tool.get(call.tool)
    if entry is None:
        return [f"{call.tool}: not a lifecycle tool the fixture declares"]
    problems = []
    declared = set(entry["arguments"])
    fixed = entry["fixed_values"]
    for path, value in argument_paths(call.arguments):
        if path not in declared and not any(d.startswith(path + "[]") for d in declared):
            problems.append(f"{call.tool}: argument {path!r} is not declared")
        if path in fixed and value not in fixed[path]:
            problems.append(f"{call.tool}: {path} = {value!r} is not in {fixed[path]!r}")
    return problems


def argument_paths(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Each (path, value) of the arguments: objects by ``.``, list items by ``[]``.

    A list of objects yields its items' fields (``messages[].role``); a list of plain values
    is one value at its own path (``sections`` = ``["memories"]``).
    """
    if isinstance(value, dict):
        for key, item in value.items():
            yield from argument_paths(item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for item in value:
            yield from argument_paths(item, f"{prefix}[]")
    else:
        yield prefix, value


@pytest.fixture(scope="module")
def catalog_without_loom() -> Iterator[str]:
    """A gateway base URL whose catalog lists only another server (no ``loom`` yet)."""
    from tests.runtime.loopback import LoopbackServer

    catalog = {
        "schemaVersion": 1,
        "generation": 4,
        "digest": "sha256:" + "1" * 64,
        "servers": [{"id": "github", "path": "/s/github/mcp", "tools": ["search_code"]}],
    }
    body = json.dumps(catalog).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    server = LoopbackServer(app, lifespan="off")
    yield server.start()
    server.stop()


@pytest.fixture
def unreachable_url() -> str:
    """A loopback base URL nothing listens on."""
    from tests.runtime.loopback import closed_port_url

    return closed_port_url()
