"""The one registry of what differs per memory backend (BACK-1).

Templates decide the wording; each entry of this registry says everything else about one
backend: which MCP server its memory tools live on (``mcp__nerve__memorize``,
``mcp__loom__loom_search``), how its tool names are recognised in a text and which of them its
wording may name, whether its tools come from the gateway catalog (then its texts have a case
per client), its settings section (``memory.<name>``: keys, checks and settings type, such as
``LoomSettings``), its setup step (what init asks and reports) and summary line, and how its
goldens are protected.

This module stands below both the configuration and the templating rooms: the loader checks a
backend's section through its entry, the templates and the wording lint read its names and
tools, and the registry imports neither room. What it needs of them it is handed: the loader
passes a ``SectionReader`` (its URL rule included), the template folder a wording is rendered
from is the ``WordingFolder`` a backend reads its nameable tools from, and init's
``SetupContext`` carries the function that writes the machine-local file.

A third backend is one ``register(Backend(...))`` here (or a new entry in ``BACKENDS``), its
choice in ``templates/copier.yml`` (a test holds the two equal), its partials under
``templates/partials/<name>/``, and its goldens; no other module names a backend.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, overload

from provisioner.base.errors import UserError
from provisioner.runtime.face import (
    LOOM_NAME_PATTERN,
    LOOM_NAME_RULE,
    LOOM_SERVER,
    NERVE_SERVER,
    SWEEP_CONCURRENCY_DEFAULT,
    SWEEP_CONCURRENCY_MAX,
    SWEEP_CONCURRENCY_MIN,
)

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

# NERVE-5: Nerve's own keys under ``memory`` (its ``MemoryConfig``: the models and store of
# its memU bridge, the dedup threshold, the knowledge filter, the categories). Nerve reads them
# whatever the backend; the loader knows them, so they load without a warning, and carries
# them through unchecked.
NERVE_MEMORY_KEYS: tuple[str, ...] = (
    "recall_model",
    "memorize_model",
    "fast_model",
    "embed_model",
    "sqlite_dsn",
    "semantic_dedup_threshold",
    "knowledge_filter",
    "categories",
)


class UnknownBackend(UserError, ValueError):
    """A backend name that is not in the registry."""


class SectionReader(Protocol):
    """What a settings check may do with a value of the merged configuration.

    The configuration loader provides it; each method blames the file the key came from.
    """

    def fail(self, key: str, problem: str) -> Exception:
        """The error to raise for ``key`` (one line naming file, key, problem)."""

    def warn(self, key: str, problem: str) -> None:
        """Record a problem that does not stop Nerve (doctor shows it)."""

    def boolean(self, key: str, value: Any, default: bool) -> bool:
        """``value`` as a YAML boolean (or the words true/false); raises otherwise."""

    def whole_number(self, key: str, value: Any, default: int, *, low: int, high: int) -> int:
        """``value`` as a whole number from ``low`` to ``high`` (its ASCII digits count too;
        empty or absent: ``default``); raises otherwise."""

    def http_url(self, value: Any) -> str | None:
        """``value`` stripped when it is an absolute http(s) URL with a host, else None."""

    def quoted(self, text: str) -> str:
        """``text`` quoted for a message, with any user and password in a URL hidden."""


class WordingFolder(Protocol):
    """What a backend's nameable tools are read from: the template folder a wording is
    rendered from (``provisioner.templating.folder.TemplateFolder``).

    Loom's default tool list is the one in the contract fixture that folder's templates are
    worded against (BACK-4); reading it raises ``ContractFixtureError`` when the fixture is
    missing or has no ``core_tools`` list, since the list is never guessed.
    """

    @property
    def loom_core_tools(self) -> frozenset[str]:
        """Loom's default ("core") tool list from the folder's contract fixture."""


@dataclass(frozen=True)
class SettingsSection:
    """A backend's ``memory.<name>`` mapping: its known keys and the check that reads them.

    ``check`` is called only while the backend is the configured one (CONF-5) and returns the
    checked settings object; under any other backend the section is carried unchecked.
    """

    keys: tuple[str, ...]
    check: Callable[[SectionReader, Mapping[Any, Any]], Any]


@dataclass(frozen=True)
class GoldenGuard:
    """Extra protection of a backend's goldens (GOLD-3, TXT-7).

    ``by_name_only``: ``nerve golden update`` rewrites them only when the backend is named.
    ``records_shipped_prompts``: the backend's job prompts as shipped are kept in the registry
    beside the templates (``shipped-memu-prompts.json``); the golden check reports a prompt
    missing from it, and the update records it. The golden room does that work, so this
    registry stays data and imports nothing that renders.
    """

    by_name_only: bool = False
    records_shipped_prompts: bool = False


# INIT-3: the memory step of ``nerve init`` per backend, and its summary line. Each entry names
# its step and line; init calls the step of the backend the files are worded for, and the
# summary shows the line. A step returns a plain mapping, which ``nerve init --json`` prints.
EMBEDDINGS_KEY_LABEL = "OpenAI API key for memU embeddings (optional, Enter to skip)"


@dataclass(frozen=True)
class SetupContext:
    """What a memory step may use: the answers' backend, config values, a way to ask, and a
    way to store a key in the machine-local configuration.

    ``ask_secret`` is None when nothing may be asked (non-interactive or slim mode).
    ``locked`` is true under lockdown (CONF-3): then nothing is asked or written outside the
    workspace, since a locked instance reads no machine-local file.
    ``store_embeddings_key(config_dir, key)`` writes memU's embeddings key where Nerve reads it
    and returns the file written (``provisioner.config.local_file.store_embeddings_key``).
    """

    backend: str
    config_dir: Path
    mcp_gateway_url: str | None
    locked: bool
    ask_secret: Callable[[str], str] | None
    store_embeddings_key: Callable[[Path, str], Path]


def memu_setup_step(context: SetupContext) -> dict[str, Any]:
    """memU: terminal mode offers the optional embeddings key and stores a given one.

    Under lockdown the key is neither asked for nor stored (a locked instance never reads
    ``config.local.yaml``); the step says the key comes from the environment instead.
    """
    step: dict[str, Any] = {"backend": context.backend, "asked": False}
    if context.locked:
        step["locked"] = True
        return step
    if context.ask_secret is not None:
        step["asked"] = True
        key = context.ask_secret(EMBEDDINGS_KEY_LABEL)
        if key:
            stored = context.store_embeddings_key(context.config_dir, key)
            step["embeddings_key_stored_in"] = str(stored)
    return step


def memu_summary_line(step: Mapping[str, Any]) -> str:
    if step.get("locked"):
        return "Memory: memU; locked, so no embeddings key was asked for or stored."
    if "embeddings_key_stored_in" in step:
        return f"Memory: memU; embeddings key stored in {step['embeddings_key_stored_in']}."
    if step["asked"]:
        return "Memory: memU; no embeddings key given (optional)."
    return "Memory: memU."


def loom_setup_step(context: SetupContext) -> dict[str, Any]:
    """Loom: nothing is asked (Loom needs no key); reports whether the gateway is set."""
    return {"backend": context.backend, "asked": False, "mcp_gateway_url": context.mcp_gateway_url}


def loom_summary_line(step: Mapping[str, Any]) -> str:
    if step.get("mcp_gateway_url"):
        return f"Memory: Loom through the MCP gateway at {step['mcp_gateway_url']}."
    return "Memory: Loom through the MCP gateway; mcp_gateway_url is not set yet."


def quiet_setup_step(context: SetupContext) -> dict[str, Any]:
    """A backend that needs nothing set up: nothing is asked, nothing is written."""
    return {"backend": context.backend, "asked": False}


def plain_summary_line(step: Mapping[str, Any]) -> str:
    return f"Memory: {step['backend']}."


@dataclass(frozen=True)
class Backend:
    """What one memory backend looks like to the agent, the wording lint, config and init."""

    name: str
    display_name: str
    mcp_server: str
    # Finds this backend's tool names in a text; the named group that matched is the name.
    tool_pattern: re.Pattern[str]
    # The tool names its wording may name (BACK-3, BACK-4), read from the template folder the
    # wording is rendered from; called lazily by the lint.
    nameable: Callable[[WordingFolder], frozenset[str]]
    # Its tools reach the agent from the gateway catalog, so a text has a case for a client
    # that gets the server and one for a client that does not (TXT-3, TXT-5).
    served_by_gateway: bool
    # memory.<name> in the configuration (CONF-5); None: the backend has no settings.
    settings: SettingsSection | None = None
    # Init's memory step (INIT-3): what it asks and stores; a mapping for the summary.
    setup_step: Callable[[SetupContext], dict[str, Any]] = quiet_setup_step
    # The summary's line about the step's mapping.
    summary_line: Callable[[Mapping[str, Any]], str] = plain_summary_line
    goldens: GoldenGuard = GoldenGuard()

    def tool_ref(self, tool: str) -> str:
        """The name the agent calls a tool by: ``mcp__<server>__<tool>``."""
        return f"mcp__{self.mcp_server}__{tool}"

    def nameable_tools(self, folder: WordingFolder) -> frozenset[str]:
        """Tool names this backend's wording may name, in wording rendered from ``folder``."""
        return self.nameable(folder)

    def tools_named(self, text: str) -> set[str]:
        """Every tool of this backend that ``text`` names."""
        return {
            next(value for value in match.groupdict().values() if value)
            for match in self.tool_pattern.finditer(text)
        }


def _memu_tools(folder: WordingFolder) -> frozenset[str]:
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


def _loom_core(folder: WordingFolder) -> frozenset[str]:
    return folder.loom_core_tools


# CONF-5: memory.loom, checked only while the backend is loom.
LOOM_KEYS = (  # CONF-5; sweep_concurrency: SWEEP-14
    "org",
    "namespace",
    "dashboard_url",
    "defer_extraction",
    "sweep_concurrency",
)
DEFAULT_DEFER_EXTRACTION = False  # CONF-5, SWEEP-3: waiting extraction unless asked otherwise


@dataclass(frozen=True)
class LoomSettings:
    """``memory.loom`` as checked under the Loom backend (CONF-5).

    Under memU nothing in ``memory.loom`` is checked, so every field keeps its default.
    """

    org: str | None = None
    namespace: str | None = None
    dashboard_url: str | None = None
    defer_extraction: bool = DEFAULT_DEFER_EXTRACTION
    sweep_concurrency: int = SWEEP_CONCURRENCY_DEFAULT  # SWEEP-14


def _check_loom_settings(read: SectionReader, section: Mapping[Any, Any]) -> LoomSettings:
    """``memory.loom`` under the Loom backend (CONF-5)."""
    return LoomSettings(
        org=_loom_name(read, "memory.loom.org", section.get("org")),
        namespace=_loom_name(read, "memory.loom.namespace", section.get("namespace")),
        dashboard_url=_dashboard_url(read, section.get("dashboard_url")),
        defer_extraction=read.boolean(
            "memory.loom.defer_extraction",
            section.get("defer_extraction"),
            DEFAULT_DEFER_EXTRACTION,
        ),
        sweep_concurrency=read.whole_number(
            "memory.loom.sweep_concurrency",
            section.get("sweep_concurrency"),
            SWEEP_CONCURRENCY_DEFAULT,
            low=SWEEP_CONCURRENCY_MIN,
            high=SWEEP_CONCURRENCY_MAX,
        ),
    )


def _loom_name(read: SectionReader, key: str, value: Any) -> str | None:
    """An org or namespace override, held to Loom's naming rule; empty means none."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and LOOM_NAME_PATTERN.fullmatch(value):
        return value
    raise read.fail(key, f"{value!r} is not a Loom name; expected {LOOM_NAME_RULE}")


def _dashboard_url(read: SectionReader, value: Any) -> str | None:
    """A link to Loom's dashboard, kept only for an absolute http(s) URL (CONF-5).

    A bad link is never fatal: it is dropped with a warning, and no link is shown.
    """
    key = "memory.loom.dashboard_url"
    text = value.strip() if isinstance(value, str) else value
    if text is None or text == "":
        return None
    if read.http_url(text) is not None:
        return str(text)
    shown = read.quoted(text) if isinstance(text, str) else repr(text)
    read.warn(key, f"{shown} dropped, no link is shown; expected an absolute http or https URL")
    return None


BACKENDS: dict[str, Backend] = {
    "memu": Backend(
        name="memu",
        display_name="memU",
        mcp_server=NERVE_SERVER,
        tool_pattern=MEMU_TOOL_PATTERN,
        nameable=_memu_tools,
        served_by_gateway=False,
        setup_step=memu_setup_step,
        summary_line=memu_summary_line,
        goldens=GoldenGuard(by_name_only=True, records_shipped_prompts=True),
    ),
    "loom": Backend(
        name="loom",
        display_name="Loom",
        mcp_server=LOOM_SERVER,
        tool_pattern=LOOM_TOOL_PATTERN,
        nameable=_loom_core,
        served_by_gateway=True,
        settings=SettingsSection(LOOM_KEYS, _check_loom_settings),
        setup_step=loom_setup_step,
        summary_line=loom_summary_line,
    ),
}


class _Names(Sequence[str]):
    """The registered names in registration order; a live view, so a registration shows."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return tuple(BACKENDS)[index]

    def __len__(self) -> int:
        return len(BACKENDS)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(BACKENDS))

    def __repr__(self) -> str:
        return repr(tuple(BACKENDS))


BACKEND_NAMES: Sequence[str] = _Names()


def register(backend: Backend) -> None:
    """Add ``backend`` to the registry (its templates must have the choice and partials)."""
    if backend.name in BACKENDS:
        raise ValueError(f"backend {backend.name!r} is registered already")
    BACKENDS[backend.name] = backend


def unregister(name: str) -> None:
    """Remove a backend added with ``register``; the built-in ones stay."""
    if name in (DEFAULT_BACKEND, "loom"):
        raise ValueError(f"backend {name!r} is built in")
    BACKENDS.pop(name, None)


def get_backend(name: str) -> Backend:
    """The registry entry for ``name``; ``UnknownBackend`` names the choices otherwise."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise UnknownBackend(
            f"{name!r} is not a memory backend; expected one of: {', '.join(BACKEND_NAMES)}"
        ) from None
