"""The one registry of what differs per memory backend (BACK-1).

Templates decide the wording; this module only says, per backend, which MCP server its memory
tools live on (``mcp__nerve__memorize``, ``mcp__loom__loom_search``), how its tool names are
recognised in a text, which of them its wording may name, and whether its tools come from the
gateway catalog (then its texts have a case per client). Adding a third backend means adding
one entry to ``BACKENDS``, its choice in ``templates/copier.yml`` (a test holds the two equal),
its partials under ``templates/partials/<name>/``, and its goldens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from provisioner import assets
from provisioner.errors import UserError
from provisioner.memory_backend import LOOM_SERVER, NERVE_SERVER

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

LOOM_TOOL_PREFIX = "loom_"


class UnknownBackend(UserError, ValueError):
    """A backend name that is not in the registry."""


class ContractFixtureError(UserError, RuntimeError):
    """The Loom contract fixture is missing or unreadable, so Loom's tool list is unknown."""


@dataclass(frozen=True)
class Backend:
    """What one memory backend looks like to the agent and to the wording lint."""

    name: str
    display_name: str
    mcp_server: str
    # Finds this backend's tool names in a text; the named group that matched is the name.
    tool_pattern: re.Pattern[str]
    # The tool names its wording may name (BACK-3, BACK-4); called lazily by the lint.
    nameable: Callable[[], frozenset[str]]
    # Its tools reach the agent from the gateway catalog, so a text has a case for a client
    # that gets the server and one for a client that does not (TXT-3, TXT-5).
    served_by_gateway: bool

    def tool_ref(self, tool: str) -> str:
        """The name the agent calls a tool by: ``mcp__<server>__<tool>``."""
        return f"mcp__{self.mcp_server}__{tool}"

    def nameable_tools(self) -> frozenset[str]:
        """Tool names this backend's wording may name."""
        return self.nameable()

    def tools_named(self, text: str) -> set[str]:
        """Every tool of this backend that ``text`` names."""
        return {
            next(value for value in match.groupdict().values() if value)
            for match in self.tool_pattern.finditer(text)
        }


def _memu_tools() -> frozenset[str]:
    return frozenset(MEMU_TOOLS)


# A memU tool is named as `mcp__nerve__<tool>` or as the bare name in backticks; the word
# "memorize" in prose is not a tool name.
_MEMU_NAMES = "|".join(MEMU_TOOLS)
MEMU_TOOL_PATTERN = re.compile(
    rf"mcp__{NERVE_SERVER}__(?P<qualified>{_MEMU_NAMES})\b|`(?P<bare>{_MEMU_NAMES})`"
)
# Every `loom_<word>` token is a Loom tool name wherever it stands: all of Loom's tools carry
# the prefix, and no other word in these texts does.
LOOM_TOOL_PATTERN = re.compile(
    rf"(?<![A-Za-z0-9])(?P<tool>{LOOM_TOOL_PREFIX}[a-z0-9]+(?:_[a-z0-9]+)*)"
)


def _loom_core() -> frozenset[str]:
    return loom_core_tools()


BACKENDS: dict[str, Backend] = {
    "memu": Backend(
        name="memu",
        display_name="memU",
        mcp_server=NERVE_SERVER,
        tool_pattern=MEMU_TOOL_PATTERN,
        nameable=_memu_tools,
        served_by_gateway=False,
    ),
    "loom": Backend(
        name="loom",
        display_name="Loom",
        mcp_server=LOOM_SERVER,
        tool_pattern=LOOM_TOOL_PATTERN,
        nameable=_loom_core,
        served_by_gateway=True,
    ),
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
