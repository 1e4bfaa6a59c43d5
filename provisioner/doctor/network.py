"""Doctor's network checks under Loom: the gateway's catalog and Loom's health probe.

Both run at once, each inside its own deadline, so a gateway that is down or hangs costs the
run one deadline, not the sum of them (DOC-1: the whole run ends within 10 s). Each check
builds its own client and closes it before returning, whatever happened. A gateway or Loom
failure is an ERR carrying the one-line reason the runtime gave, never an exception.

Under queued extraction the catalog check also says whether the catalog lists ``loom_op``, through
which the sweep follows its queued batches up until Loom has written them (SWEEP-15): without
it a batch that fails inside Loom is lost to the sweep, a WARN.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from provisioner.base.counts import counted
from provisioner.config.model import Config
from provisioner.doctor.check import ERR, OK, WARN, Check, joined
from provisioner.runtime.face import (
    CATALOG_DEADLINE_S,
    LOOM_OP_TOOL,
    LOOM_SERVER,
    CatalogError,
    GatewayCatalog,
    GatewayError,
    LoomMemory,
    MemoryBackendUnavailable,
)
from provisioner.templating.folder import loom_core_tools

NETWORK_CHECK_DEADLINE_S = 8.0  # DOC-1: each network check; the whole run ends within 10 s
# Waiting a little past the reader's own 5 s (GW-2) lets its timeout be the one reported.
CATALOG_WAIT_S = CATALOG_DEADLINE_S + 0.5

# What to do when the catalog cannot be read, by CatalogError.reason.
CATALOG_ADVICE = {
    "unreachable": "start the gateway, or correct mcp_gateway_url",
    "timeout": "the gateway is up but slow or stuck; check its health and logs",
    "invalid": "the gateway serves a catalog this version cannot use; check the gateway version",
    "not_json": "mcp_gateway_url may point at something that is not the MCP gateway",
}
CATALOG_ADVICE_OTHER = "check the gateway's logs for the request that failed"
FOLLOWED_UP = f"{LOOM_OP_TOOL} listed: queued batches are followed up until Loom has written them"
NOT_FOLLOWED_UP = (
    f"{LOOM_OP_TOOL} not listed: queued batches cannot be followed up, so one that fails "
    "inside Loom is lost"
)


async def network_checks(config: Config) -> list[Check]:
    """The catalog and health checks, concurrently; nothing under memU or without a URL."""
    if config.memory_backend != "loom" or not config.mcp_gateway_url:
        return []
    url = config.mcp_gateway_url
    return list(
        await asyncio.gather(
            _within_deadline(
                "loom.catalog",
                lambda: catalog_check(url, queued=config.loom.defer_extraction),
            ),
            _within_deadline("loom.namespace", lambda: namespace_check(config)),
        )
    )


async def _within_deadline(check_id: str, run: Callable[[], Awaitable[Check]]) -> Check:
    try:
        async with asyncio.timeout(NETWORK_CHECK_DEADLINE_S):
            return await run()
    except TimeoutError:
        return Check(
            check_id,
            ERR,
            f"no answer within {NETWORK_CHECK_DEADLINE_S:g} s",
            advice="the gateway is up but not answering; check its health and logs",
        )


async def catalog_check(url: str, *, queued: bool = False) -> Check:
    """Whether the gateway's catalog lists ``loom``, its generation, and Loom's tools (GW-2);
    under queued extraction (``queued``), whether it lists ``loom_op`` too (SWEEP-15)."""
    async with GatewayCatalog(url) as reader:
        catalog = await reader.current(deadline_s=CATALOG_WAIT_S)
        error = reader.last_error
    if catalog is None:
        if error is None:  # the read is still under way: the gateway is stuck
            error = CatalogError(
                f"the catalog did not arrive within {CATALOG_WAIT_S:g} s", reason="timeout"
            )
        return Check(
            "loom.catalog",
            ERR,
            f"the catalog could not be read: {error}",
            advice=CATALOG_ADVICE.get(error.reason, CATALOG_ADVICE_OTHER),
            source=f"{url}/catalog",
        )
    server = catalog.server(LOOM_SERVER)
    if server is None:
        return Check(
            "loom.catalog",
            ERR,
            f"catalog generation {catalog.generation} does not list {LOOM_SERVER}: the agent "
            "has no memory tools",
            advice="ask the platform to add Loom to this agent's gateway catalog, or keep "
            "memory.backend: memu until it does",
            source=f"{url}/catalog",
        )
    core = loom_core_tools()
    listed = [tool for tool in server.tools if tool in core]
    not_listed = sorted(core - set(server.tools))
    message = (
        f"catalog generation {catalog.generation} lists {LOOM_SERVER} with "
        f"{len(listed)} of Loom's {len(core)} default tools ({joined(listed)})"
    )
    if not_listed:
        message += f"; not offered: {joined(not_listed)}"
    if queued and LOOM_OP_TOOL not in server.tools:
        return Check(
            "loom.catalog",
            WARN,
            f"{message}; {NOT_FOLLOWED_UP}",
            advice=f"ask the platform to grant {LOOM_OP_TOOL} to this agent, or set "
            "memory.loom.defer_extraction: false",
            source=f"{url}/catalog",
        )
    if queued:
        message += f"; {FOLLOWED_UP}"
    return Check("loom.catalog", OK, message, source=f"{url}/catalog")


async def namespace_check(config: Config) -> Check:
    """The org and namespace Loom resolved, and where each came from (LOOM-3)."""
    try:
        async with LoomMemory.from_config(config) as memory:
            identity = await memory.health()
    except (MemoryBackendUnavailable, GatewayError) as error:
        return Check(
            "loom.namespace",
            ERR,
            f"Loom's health probe failed: {error}",
            advice="see loom.catalog above; if the catalog is fine, check Loom's own status",
        )
    return Check(
        "loom.namespace",
        OK,
        f"org {identity.org} ({_source_word(identity.org_source)}), namespace "
        f"{identity.namespace} ({_source_word(identity.namespace_source)}), "
        f"{counted(identity.memory_count, 'memory')}",
        source="namespace.summary",
    )


def _source_word(source: str) -> str:
    return "set in memory.loom" if source == "config" else "resolved by Loom"
