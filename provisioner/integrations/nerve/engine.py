"""``nerve_memory(config)``: everything Nerve's engine needs of the package, in one object
(NERVE-13…NERVE-17).

Nerve's engine builds one ``NerveMemory`` when it is constructed and asks it, at each place
where it does the same for memU today:

* which of its own tools to hide (``hidden_tools``, ``tool_registry``): memU's nine under Loom,
  none under memU (NERVE-14);
* which MCP servers a session adds (``mcp_servers``): the gateway catalog's ``loom`` server in
  the shape of Nerve's ``mcp_servers`` entries — http, the gateway's URL and path, no header —
  and none while the catalog does not list it (NERVE-13); ``session_tools`` names the tools a
  session then has;
* the system prompt's memory section for those tools (``prompt_section``), and the recall in the
  place Nerve's prompt has for recalled memories (``recalled_memories``), saying "could not be
  recalled" apart from "none" (NERVE-15);
* the sweep its own memorization loop and sweep route run (``sweep``): there is no second loop
  (NERVE-16).

Under memU the object is inert: it opens nothing, hides nothing, adds nothing, and Nerve goes on
as it does today. Under Loom ``open()`` opens the Loom backend on the state file the package's
command line, doctor and web page read (``$NERVE_HOME/memory/state.sqlite3`` for Nerve's own
configuration, NERVE-7), probes Loom's health once so the card names the identity, and builds
the sweeper over Nerve's ``nerve.db``. Opening never fails for the gateway's state (LOOM-2);
``aclose()`` closes what it opened and may be called any number of times.

The settings are read as Nerve lays its files over each other (``nerve_settings``); a value the
package cannot use raises one line naming the key (``ConfigError`` or ``ValueError``) when the
object is built, so Nerve never starts on a typo that would keep memories where nobody looks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from provisioner.backends import MEMU_TOOLS
from provisioner.base.errors import UserError
from provisioner.config.paths import MEMORY_DIR, STATE_FILE, find_folders
from provisioner.integrations.nerve.settings import nerve_settings
from provisioner.runtime.face import ProvisionerRuntimeError, memory_backend

log = logging.getLogger(__name__)

LOOM_SERVER_NAME = "loom"  # NERVE-13: the MCP server's name in a session, as in the catalog
SESSION_TOOL_PREFIX = f"mcp__{LOOM_SERVER_NAME}__"  # NERVE-13: how a session names its tools
# NERVE-15: Nerve joins its prompt's parts with this rule; the memory section is one more part.
PROMPT_PART_SEPARATOR = "\n\n---\n\n"
CODEX_AGENT_BACKEND = "codex"  # TXT-5: Nerve's agent backend whose sessions get the Codex note
RECALLED_HEADING = "# Recalled Memories"  # NERVE-15: the heading Nerve writes above the recall
WORKSPACE_PATH_LINE = "- **Path:**"  # TXT-5: the footer line of Nerve's bundles kept under Loom
# NERVE-17: the keys the package documents in Nerve's files, by dotted prefix ("" is the top
# level), for Nerve's unknown-key check; ``memory.loom`` is a section of the package's own.
NERVE_CONFIG_KEYS: Mapping[str, frozenset[str]] = {
    "": frozenset({"mcp_gateway_url"}),
    "memory": frozenset({"backend", "loom"}),
}


class ToolRegistryLike(Protocol):
    """Nerve's ``ToolRegistry`` as far as hiding tools needs it."""

    def list(self, *, include_hoa: bool = False) -> list[Any]: ...

    def register(self, spec: Any) -> None: ...


def _config_dir_of(config: object) -> Path | None:
    """The configuration folder of Nerve's config object (``config_dir``), a path, or None."""
    if config is None:
        return None
    if isinstance(config, (str, os.PathLike)):
        return Path(config)
    named = getattr(config, "config_dir", None)
    return Path(named) if isinstance(named, (str, os.PathLike)) and str(named) else None


class NerveMemory:
    """The package's memory for one Nerve engine (see the module docstring).

    ``config`` is Nerve's config object (its ``config_dir`` is read), a configuration folder, or
    None (found as Nerve finds it). ``env`` stands for the process environment in tests.
    """

    def __init__(self, config: object = None, *, env: Mapping[str, str] | None = None) -> None:
        found = find_folders(_config_dir_of(config), env)
        self.config_dir = found.config_dir
        self.settings = nerve_settings(self.config_dir, env=env)
        self.backend = memory_backend(self.settings)
        # NERVE-7, NERVE-16: in Nerve's state folder, where the command line, doctor and web
        # page look for an instance whose nerve.db is there (Nerve makes it before its engine)
        self.state_path = found.state_dir / MEMORY_DIR / STATE_FILE
        self.loom: Any = None  # the open LoomMemory under Loom
        self.sweeper: Any = None
        self._env = env

    # --- what is decided by the configuration alone ------------------------------------

    @property
    def active(self) -> bool:
        """Whether the package runs memory: ``memory.backend`` is ``loom``."""
        return self.backend == "loom"

    @property
    def hidden_tools(self) -> frozenset[str]:
        """Nerve's tools not to offer: memU's nine under Loom, none under memU (NERVE-14)."""
        return frozenset(MEMU_TOOLS) if self.active else frozenset()

    def tool_registry(self, registry: ToolRegistryLike) -> Any:
        """``registry`` without the hidden tools: a new registry of the same class, every other
        tool registered in the same order; ``registry`` itself under memU (NERVE-14). The
        engine's sessions, its Codex endpoint and its external MCP endpoint all serve from it.
        """
        if not self.active:
            return registry
        kept = type(registry)()
        for spec in registry.list(include_hoa=True):
            if spec.name not in self.hidden_tools:
                kept.register(spec)
        return kept

    # --- lifecycle ---------------------------------------------------------------------

    async def open(self) -> bool:
        """Open Loom's side under Loom; True when the package now runs memory (memU's bridge
        is then not to be started). Never fails for the gateway's state; a health probe that
        fails is kept in the diagnostics and tried again by the card. A state file of a newer
        version, or a ``nerve.db`` that is not Nerve's, raises (the host's to fix)."""
        if not self.active or self.loom is not None:
            return self.active
        from provisioner.runtime.face import LoomMemory

        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        self.loom = await LoomMemory.from_settings(self.settings, state_path=self.state_path).open()
        try:
            await self.loom.health()  # the card's identity (NERVE-16)
        except ProvisionerRuntimeError as error:
            log.warning("Loom health probe at start: %s", error)
        self._build_sweeper()
        return True

    def _build_sweeper(self) -> str | None:
        """Build the sweeper over Nerve's ``nerve.db`` if it is not built; the reason it could
        not be (a ``nerve.db`` missing, busy or not Nerve's), kept for the next sweep, or None.
        """
        if self.sweeper is not None:
            return None
        from provisioner.integrations.nerve.sweeper import nerve_sweeper

        try:
            self.sweeper = nerve_sweeper(
                self.loom, nerve_db=find_folders(self.config_dir, self._env).nerve_db
            )
        except (ProvisionerRuntimeError, OSError) as error:
            log.warning("Loom's sweep cannot read nerve.db yet: %s", error)
            return str(error)
        return None

    async def aclose(self) -> None:
        """Close the sweeper's reader and the backend; safe to call again, or unopened."""
        sweeper, self.sweeper = self.sweeper, None
        loom, self.loom = self.loom, None
        if sweeper is not None:
            sweeper.close()
        if loom is not None:
            await loom.aclose()

    # --- what a session gets ------------------------------------------------------------

    def _catalog_server(self) -> Any:
        return self.loom.catalog_server() if self.loom is not None else None

    def mcp_server_entries(self) -> dict[str, dict[str, Any]]:
        """The MCP servers a session adds, as entries of Nerve's ``mcp_servers`` mapping:
        ``{"loom": {"type": "http", "url": <gateway URL + the catalog's path>}}`` while the last
        good catalog lists ``loom``, else empty (NERVE-13). No header: the gateway knows the
        agent from its connection, and Nerve's credentials never go to it."""
        server = self._catalog_server()
        if server is None:
            return {}
        return {LOOM_SERVER_NAME: {"type": "http", "url": server.url, "enabled": True}}

    def mcp_servers(self) -> list[Any]:
        """``mcp_server_entries`` as Nerve's own ``McpServerConfig`` objects, for the list the
        engine hands its backends as external servers (Claude's and Codex's sessions)."""
        entries = self.mcp_server_entries()
        if not entries:
            return []
        from nerve.config import McpServerConfig  # type: ignore[import-not-found]

        return [McpServerConfig.from_dict(name, entry) for name, entry in entries.items()]

    def loom_tools(self) -> tuple[str, ...]:
        """The catalog's Loom tools (bare names, sorted); empty without ``loom``."""
        server = self._catalog_server()
        return tuple(sorted(server.tools)) if server is not None else ()

    def session_tools(self) -> tuple[str, ...]:
        """The Loom tools a session then has, as it names them: ``mcp__loom__<tool>``, exactly
        the catalog's (NERVE-13)."""
        return tuple(f"{SESSION_TOOL_PREFIX}{tool}" for tool in self.loom_tools())

    def prompt_section(self, agent_backend: str | None = None) -> str:
        """The system prompt's memory section for the session's actual Loom tools, as one more
        part of Nerve's prompt (its separator first); empty under memU (NERVE-15). Says memory
        cannot be used when Loom is not available, or no Loom tool reaches the session. For a
        session on Nerve's ``codex`` agent backend the Codex note follows it (TXT-5)."""
        if not self.active:
            return ""
        from provisioner.templating.texts import memory_section

        available = self.loom is not None and self.loom.available
        parts = [memory_section("loom", loom_tools=self.loom_tools(), available=available)]
        if agent_backend == CODEX_AGENT_BACKEND:
            parts.append(self.codex_note())
        return "".join(PROMPT_PART_SEPARATOR + part.strip() for part in parts)

    async def recalled_memories(self, session_id: str) -> list[str]:
        """The recall for a new session, for the list Nerve's prompt puts under its
        ``# Recalled Memories`` heading (NERVE-15): one entry holding the recall's text, which
        says the memories could not be recalled when Loom did not answer, and that none were
        recalled when it answered with none. Frozen per session in the state (REC-3), so a
        rebuilt prompt has the same bytes; a failed recall is tried again at the next build.
        Empty under memU. Never raises for Loom's or the state's failures."""
        if not self.active:
            return []
        from provisioner.runtime.face import session_context

        if self.loom is None:
            text = session_context((), recalled=False, shape="legacy")
        else:
            recall = await self.loom.startup_recall(session_id)
            text = session_context(recall.items, recalled=recall.recalled, shape="legacy")
        return [text.removeprefix(RECALLED_HEADING).strip()]

    # --- the texts Nerve shows elsewhere -----------------------------------------------

    def codex_note(self) -> str:
        """The note for Codex sessions, worded for the backend and the catalog (TXT-5)."""
        from provisioner.templating.texts import codex_note

        return codex_note(self.backend, loom_tools=self.loom_tools())

    def worker_onboarding(self) -> str:
        """The worker onboarding step about memory, to append to Nerve's first-boot prompt
        (its separator first) under Loom; empty under memU, whose wording Nerve has (TXT-5)."""
        if not self.active:
            return ""
        from provisioner.templating.texts import worker_onboarding

        text = worker_onboarding(self.backend, loom_tools=self.loom_tools())
        return PROMPT_PART_SEPARATOR + text.strip() + "\n"

    def external_agent_memory(self, agent: str) -> str:
        """The memory section of an external agent's bundle (``codex`` or ``claude-code``),
        worded for the backend and the catalog this engine read (TXT-5)."""
        from provisioner.templating.texts import external_agent_memory

        return external_agent_memory(self.backend, agent, loom_tools=self.loom_tools())

    # --- the sweep in Nerve's own loop --------------------------------------------------

    async def sweep(self) -> dict[str, Any]:
        """One Loom sweep of Nerve's ``nerve.db``, for Nerve's ``run_memorization_sweep``: its
        loop and its sweep route both call it, so there is one loop (NERVE-16). Answers in the
        shape Nerve's memU sweep answers (``sessions_scanned``, ``sessions_indexed``,
        ``messages_indexed``) plus the sweep's own report; ``skipped`` when the package does
        not run memory or Loom's side is not open. Never raises for Loom's or the transcripts'
        failures (SWEEP-12); an overlapping sweep answers ``stopped: already_running``."""
        if not self.active:
            return {"skipped": "memory.backend is memu"}
        if self.loom is None:
            return {"skipped": "Loom's side is not open"}
        unbuilt = self._build_sweeper()
        if unbuilt is not None:
            return {"skipped": "nerve.db cannot be read", "error": unbuilt}
        report = await self.sweeper.run_once()
        return {
            "backend": "loom",
            "sessions_scanned": report.sessions_seen,
            "sessions_indexed": report.sessions_swept,
            "messages_indexed": report.messages_taken,
            **report.as_dict(),
        }


def nerve_memory(config: object = None, *, env: Mapping[str, str] | None = None) -> NerveMemory:
    """The package's memory for Nerve's configuration (see ``NerveMemory``); not yet opened."""
    return NerveMemory(config, env=env)


def hidden_tools(config: object = None) -> frozenset[str]:
    """The tools Nerve must not offer for ``config``'s backend (NERVE-14)."""
    return NerveMemory(config).hidden_tools


def allow_config_keys(allowed: dict[str, set[str]]) -> dict[str, set[str]]:
    """Add the keys the package documents to Nerve's map of allowed extra keys, in place, so
    ``nerve config validate --strict-keys`` and the warnings of every ``nerve`` command accept
    ``memory.backend``, ``memory.loom`` and ``mcp_gateway_url`` (NERVE-17). Returns the map."""
    for prefix, keys in NERVE_CONFIG_KEYS.items():
        allowed.setdefault(prefix, set()).update(keys)
    return allowed


def cron_job_prompt(job_id: str, prompt: str, config: object = None) -> str:
    """The prompt a cron job runs with under ``config``'s backend: a shipped memU prompt in its
    backend's wording, anything else as written (TXT-7, NERVE-17). Nerve's loader calls it for
    each job it loads; it keeps its own loader. A configuration that cannot be read leaves the
    prompt as written (the engine's start says what is wrong with it)."""
    from provisioner.templating.jobs import effective_job_prompt

    return effective_job_prompt(job_id, prompt, _backend_or_memu(config, f"cron job {job_id}"))


def _backend_or_memu(config: object, what: str) -> str:
    """The backend of ``config``; memU (Nerve's own wording stands) when it cannot be read,
    logged: the engine's start says what is wrong with the configuration."""
    try:
        return NerveMemory(config).backend
    except (UserError, ValueError, OSError) as error:
        log.warning("%s: backend unknown (%s); Nerve's own wording stands", what, error)
        return "memu"


def external_agent_first_action(agent: str, first_action: str, config: object = None) -> str:
    """The memory part of the bundle Nerve writes for an external agent (``codex`` or
    ``claude-code``): ``first_action`` as Nerve wrote it under memU; under Loom the package's
    wording, whose first action is Loom's briefing or search, not memU's ``session_context``,
    a tool Nerve no longer serves under Loom (TXT-5, NERVE-14). The bundle is rendered outside
    the engine, with no catalog read, so it names Loom's default tools, as the workspace files
    init words do."""
    if _backend_or_memu(config, f"{agent} bundle") != "loom":
        return first_action
    from provisioner.templating.folder import loom_core_tools
    from provisioner.templating.texts import external_agent_memory

    return external_agent_memory("loom", agent, loom_tools=loom_core_tools()).strip()


def external_agent_footer(agent: str, footer: str, config: object = None) -> str:
    """The workspace footer of an external agent's bundle: as Nerve wrote it under memU;
    under Loom its lines up to the workspace's path, without the lines that send the agent to
    memU's ``memorize`` and ``memory_recall`` (the memory part says what to use instead)."""
    if _backend_or_memu(config, f"{agent} bundle") != "loom":
        return footer
    kept: list[str] = []
    for line in footer.splitlines():
        kept.append(line)
        if line.startswith(WORKSPACE_PATH_LINE):
            return "\n".join(kept) + "\n"
    return footer  # not the footer's shape: left as Nerve wrote it


def doctor_lines(config: object = None, *, network: bool = True) -> tuple[list[str], ...]:
    """The package's checks as lines of Nerve's doctor: ``(ok, warnings, errors)``, each line
    ``[OK] memory: …``, ``[WARN] memory: … — advice`` or ``[ERR] …`` (NERVE-17). Under memU
    only the backend's line. ``network=False`` (or a running event loop, as in Nerve's
    in-daemon doctor) leaves out the checks that ask the gateway."""
    import asyncio

    from provisioner.doctor.run import run_doctor, run_doctor_offline

    try:
        memory = NerveMemory(config)
    except (UserError, ValueError, OSError) as error:
        return [], [], [f"[ERR] memory: {error}"]
    if not memory.active:
        return ["[OK] memory: backend memU (Nerve's own memory)"], [], []
    try:
        asyncio.get_running_loop()
        network = False
    except RuntimeError:
        pass
    workspace = Path(str(memory.settings.get("workspace", "~/nerve-workspace"))).expanduser()
    run = run_doctor if network else run_doctor_offline
    report = run(memory.config_dir, workspace)
    ok: list[str] = []
    warnings: list[str] = []
    errors: list[str] = []
    for check in report.checks:
        line = f"[{check.status}] memory: {check.message}"
        if check.advice and check.status != "OK":
            line += f" — {check.advice}"
        {"OK": ok, "WARN": warnings}.get(check.status, errors).append(line)
    return ok, warnings, errors


def nerve_router(
    config: object,
    memory: Callable[[], NerveMemory | None],
    *,
    dependencies: Sequence[Any] = (),
) -> Any:
    """The Memory card's routes for Nerve's app (``fastapi_router``): the configuration read
    from Nerve's folders for ``config`` (Nerve's config object, or its folder), and the running
    backend asked of ``memory`` — a function answering the engine's ``NerveMemory``, None
    before the engine starts — on each request, since Nerve builds its routes before its
    lifespan starts the engine (NERVE-4, NERVE-16). ``dependencies`` (Nerve's
    ``Depends(require_auth)``) guard every route, refusals included."""
    from provisioner.config.loader import load_config
    from provisioner.web import fastapi_router

    folder = find_folders(_config_dir_of(config)).config_dir
    workspace = nerve_settings(folder).get("workspace")
    package_config = load_config(folder, workspace)

    def running() -> Any:
        current = memory()
        return current.loom if current else None

    return fastapi_router(package_config, memory=running, dependencies=dependencies)
