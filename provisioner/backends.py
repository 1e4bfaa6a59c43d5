"""The one registry of what differs per memory backend (BACK-1).

Templates decide the wording; this module only says, per backend, which MCP server its memory
tools live on (so ``tool("memorize")`` renders as ``mcp__nerve__memorize``), which tool names its
wording may name, and which it must never name. Adding a third backend means adding one entry
to ``BACKENDS`` and its template branches.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from provisioner import assets
from provisioner.errors import UserError

DEFAULT_BACKEND = "memu"  # BACK-1

# BACK-2: personal (SOUL, IDENTITY, USER, AGENTS, TOOLS, MEMORY) and worker (SOUL, AGENTS,
# TOOLS, MEMORY, TASK); which files each gets is decided by the template's file names.
PROFILES: tuple[str, ...] = ("personal", "worker")
DEFAULT_PROFILE = "personal"

# BACK-3: memU's nine memory tools, served by Nerve's own MCP server ``nerve``.
MEMU_TOOLS: tuple[str, ...] = (
    "memorize",
    "memory_recall",
    "memory_update",
    "memory_delete",
    "conversation_history",
    "memory_records_by_date",
    "memory_expand_category",
    "category_update",
    "session_context",
)

NERVE_SERVER = "nerve"  # BACK-3: Nerve's own MCP server
LOOM_SERVER = "loom"  # BACK-3, LOOM-1: Loom's server id in the gateway catalog
LOOM_TOOL_PREFIX = "loom_"


class UnknownBackend(UserError, ValueError):
    """A backend name that is not in the registry."""


class ContractFixtureError(UserError, RuntimeError):
    """The Loom contract fixture is missing or unreadable, so Loom's tool list is unknown."""


@dataclass(frozen=True)
class Backend:
    """What one memory backend looks like to the agent."""

    name: str
    display_name: str
    mcp_server: str

    def tool_ref(self, tool: str) -> str:
        """The name the agent calls a tool by: ``mcp__<server>__<tool>``."""
        return f"mcp__{self.mcp_server}__{tool}"

    def nameable_tools(self) -> frozenset[str]:
        """Tool names this backend's wording may name (BACK-3, BACK-4)."""
        if self.name == "loom":
            return loom_core_tools()
        return frozenset(MEMU_TOOLS)

    def forbidden_tools(self) -> frozenset[str]:
        """Tool names this backend's wording must never name (GOLD-5).

        memU's wording names no ``loom_*`` tool (checked by prefix, not by this set); Loom's
        wording names none of memU's nine tools.
        """
        if self.name == "loom":
            return frozenset(MEMU_TOOLS)
        return frozenset()


BACKENDS: dict[str, Backend] = {
    "memu": Backend(name="memu", display_name="memU", mcp_server=NERVE_SERVER),
    "loom": Backend(name="loom", display_name="Loom", mcp_server=LOOM_SERVER),
}

BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)


def get_backend(name: str) -> Backend:
    """The registry entry for ``name``; ``UnknownBackend`` names the choices otherwise."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise UnknownBackend(
            f"{name!r} is not a memory backend; expected one of: {', '.join(BACKEND_NAMES)}"
        ) from None


@cache
def loom_core_tools() -> frozenset[str]:
    """Loom's default ("core") tool list, read from the contract fixture (BACK-4).

    Raises ``ContractFixtureError`` when the fixture is missing or has no ``core_tools``
    list: the list is never guessed.
    """
    path = assets.loom_fixture_path()
    try:
        with open(path, encoding="utf-8") as handle:
            tools = json.load(handle)["core_tools"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ContractFixtureError(
            f"{path}: cannot read Loom's core tool list ({type(error).__name__}); expected the "
            "fixture written by scripts/loom_contract_fixture.py"
        ) from None
    if not isinstance(tools, list) or not all(isinstance(tool, str) for tool in tools):
        raise ContractFixtureError(f"{path}: core_tools: expected a list of tool names")
    return frozenset(tools)
