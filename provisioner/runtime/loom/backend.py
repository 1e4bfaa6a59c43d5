"""The Loom memory backend: startup recall, extraction, health and diagnostics (LOOM-1…LOOM-4).

``LoomMemory`` reaches Loom as the ``loom`` server of the gateway's catalog and makes only the
lifecycle calls (LOOM-1): the startup recall (``context.pack``, falling back to
``search.query``; REC-1…REC-4), one extraction call per batch the sweep hands it
(``memory.set_from_messages``; SWEEP-3), and the health probe (``namespace.summary``; LOOM-3).

It is built whatever the gateway's state (LOOM-2): with no gateway URL it has no connection
at all and reports itself unavailable; with a catalog that does not list ``loom`` its calls
fail with ``ServerNotListed``. A startup recall never raises for a gateway or Loom failure: it
answers "could not be recalled" (``Recall.recalled`` False), which is never the same as "no
memories", and freezes nothing. A successful recall is frozen per session in the state store
(REC-3), so every later prompt of that session — also after a restart — shows the same bytes.

Use it as an async context manager::

    async with LoomMemory.from_config(config, state=store) as memory:
        recall = await memory.startup_recall(session_id)

Entering it reads the catalog once (bounded by the catalog's own 5 s), so ``available`` and
``agent_tools()`` answer from the start; leaving it closes every HTTP client it opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any, Protocol

import httpx

from provisioner.runtime.gateway.catalog import GatewayCatalog
from provisioner.runtime.gateway.connection import LoomConnection
from provisioner.runtime.gateway.errors import GatewayError, NoAnswer, PolicyRefused
from provisioner.runtime.gateway.outcomes import ToolResult
from provisioner.runtime.gateway.server import EXTRACTION, READ, Clock, Sleep
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import extracted_from, extraction_arguments, identity_from
from provisioner.runtime.loom.recall import (
    RECALL_DEADLINE_S,
    pack_arguments,
    pack_lines,
    search_arguments,
    search_lines,
)
from provisioner.runtime.loom.report import ErrorRecord, LastError
from provisioner.runtime.loom.types import Extracted, Identity, Recall
from provisioner.runtime.memory_contract import LOOM_SERVER, MemoryBackendUnavailable
from provisioner.runtime.state import StateStore
from provisioner.runtime.transcripts import Message

EXTRACT_DEADLINE_S = 130.0  # SWEEP-3: a little past the gateway's 120 s call limit
HEALTH_DEADLINE_S = 5.0  # LOOM-3 (our choice): a read, bounded like the recall
RECALL_GUARD_S = 0.05  # REC-1 (our choice): a backstop past the 5 s, should the clock be off
LOOM_BACKEND = "loom"

NOT_RECALLED = Recall(items=(), recalled=False, source=None)  # REC-4

TransportFactory = Callable[[], httpx.AsyncBaseTransport]


class LoomSettingsLike(Protocol):
    """What the backend reads of ``memory.loom`` (``provisioner.config.loader.LoomSettings``)."""

    @property
    def org(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...


class ConfigLike(Protocol):
    """What the backend reads of a loaded configuration (``provisioner.config.loader.Config``).

    A protocol rather than the class itself: the runtime imports nothing of the provisioning
    half, so Nerve's engine can build the backend without loading the config loader.
    """

    @property
    def memory_backend(self) -> str: ...
    @property
    def mcp_gateway_url(self) -> str | None: ...
    @property
    def loom(self) -> LoomSettingsLike: ...


class LoomMemory:
    """Memory kept in Loom, reached through the MCP gateway. Build it with ``from_config``."""

    def __init__(
        self,
        *,
        gateway_url: str | None,
        org: str | None,
        namespace: str | None,
        state: StateStore | None = None,
        transport_factory: TransportFactory | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self._gateway_url = gateway_url
        self._org = org
        self._namespace = namespace
        self._given_state = state
        self._state = state
        self._transport_factory = transport_factory
        self._clock = clock or time.monotonic
        self._sleep = sleep
        self._wall_clock = wall_clock or time.time
        self._errors = ErrorRecord(self._wall_clock)
        self._catalog: GatewayCatalog | None = None
        self._connection: LoomConnection | None = None
        self._stack: AsyncExitStack | None = None
        self._identity: Identity | None = None
        self._batch_budget: dict[str, Any] | None = None

    @classmethod
    def from_config(
        cls,
        config: ConfigLike,
        *,
        state: StateStore | None = None,
        transport_factory: TransportFactory | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> LoomMemory:
        """The backend for a loaded configuration whose ``memory.backend`` is ``loom``.

        ``state`` keeps frozen recalls (an in-memory store when None, closed with the
        backend; a given store stays the caller's). ``transport_factory`` (a test seam)
        builds the transport of each HTTP client; ``clock`` (monotonic seconds), ``sleep`` and
        ``wall_clock`` (epoch seconds, for diagnostics) are injectable too. Raises
        ``ValueError`` when the configuration names another backend (LOOM-1).
        """
        if config.memory_backend != LOOM_BACKEND:
            raise ValueError(
                f"memory.backend is {config.memory_backend!r}; LoomMemory serves only 'loom'"
            )
        return cls(
            gateway_url=config.mcp_gateway_url or None,
            org=config.loom.org,
            namespace=config.loom.namespace,
            state=state,
            transport_factory=transport_factory,
            clock=clock,
            sleep=sleep,
            wall_clock=wall_clock,
        )

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> LoomMemory:
        stack = AsyncExitStack()
        try:
            if self._state is None:
                self._state = stack.enter_context(StateStore(":memory:"))
            if self._gateway_url is not None:
                await self._open_gateway(stack, self._gateway_url)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        if self._catalog is not None:
            await self._catalog.current()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()
        self._connection = None
        self._state = self._given_state

    async def _open_gateway(self, stack: AsyncExitStack, url: str) -> None:
        factory = self._transport_factory
        catalog = GatewayCatalog(url, transport=factory() if factory else None, clock=self._clock)
        self._catalog = await _enter(stack, catalog)
        connection = LoomConnection(
            catalog,
            server_id=LOOM_SERVER,
            transport_factory=factory,
            clock=self._clock,
            sleep=self._sleep,
        )
        self._connection = await _enter(stack, connection)

    # --- what Nerve asks --------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """Whether memory can be used now: a gateway, ``loom`` in its catalog, breaker not open."""
        if self._connection is None or self._catalog is None:
            return False
        catalog = self._catalog.latest
        if catalog is None or not catalog.lists(LOOM_SERVER):
            return False
        return self._connection.breaker.state != "open"

    def agent_tools(self) -> frozenset[str]:
        """The Loom tools the catalog lists for the agent; empty without ``loom`` (TXT-3)."""
        catalog = self._catalog.latest if self._catalog else None
        server = catalog.server(LOOM_SERVER) if catalog else None
        return frozenset(server.tools) if server else frozenset()

    async def startup_recall(self, session_id: str) -> Recall:
        """The memories for a session's start, frozen for that session (REC-1…REC-4).

        A recall frozen before (also by an earlier process on the same state file) is answered
        from the store. Otherwise Loom is asked, within 5 s for the whole read; any failure
        answers ``NOT_RECALLED`` ("could not be recalled"), records the error for diagnostics
        and freezes nothing, so the next session start tries again.
        """
        state = self._require_state()
        frozen = state.frozen_recall(session_id)
        if frozen is not None:
            return Recall(items=frozen.items, recalled=True, source=frozen.source)
        if self._connection is None:
            return NOT_RECALLED
        try:
            async with asyncio.timeout(RECALL_DEADLINE_S + RECALL_GUARD_S):
                source, lines = await self._recall_from_loom(self._connection)
        except TimeoutError:
            self.note_error(
                "recall",
                NoAnswer(
                    f"the recall passed its {RECALL_DEADLINE_S:g} s",
                    deadline_s=RECALL_DEADLINE_S,
                ),
            )
            return NOT_RECALLED
        except GatewayError as error:
            self.note_error("recall", error)
            return NOT_RECALLED
        frozen = state.freeze_recall(session_id, source=source, items=lines, now=self._wall_clock())
        return Recall(items=frozen.items, recalled=True, source=frozen.source)

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        """Hand ``messages`` to Loom in one ``loom_memory_set_from_messages`` call (SWEEP-3).

        ``context`` turns go along as ``{role, content}`` only; ``defer`` queues the batch
        (SWEEP-4). One attempt under the ``EXTRACTION`` policy, waiting up to 130 s. Failures
        are the gateway client's outcome classes, unchanged; ``MemoryBackendUnavailable``
        without a gateway URL; ``ValueError`` for arguments Loom would refuse (no call made).
        """
        connection = self._require_connection()
        arguments = extraction_arguments(
            messages, context, session_id=session_id, defer=defer, namespace=self._namespace
        )
        tool = contract.TOOLS[contract.SET_FROM_MESSAGES]
        try:
            result = await connection.call_tool(
                tool, arguments, deadline_s=EXTRACT_DEADLINE_S, policy=EXTRACTION
            )
            return extracted_from(result.data, sent=len(messages), defer=defer)
        except GatewayError as error:
            sent = [message.content for message in (*messages, *context)]
            self.note_error("extract", error, sent_texts=sent)
            raise

    async def health(self) -> Identity:
        """Probe Loom with ``namespace.summary``: who it takes the agent to be (LOOM-3).

        ``memory.loom.org`` and ``memory.loom.namespace`` override what Loom resolved, and the
        identity says where each came from. Raises ``MemoryBackendUnavailable`` without a
        gateway URL, and the gateway client's outcome classes otherwise.
        """
        connection = self._require_connection()
        arguments = {"namespace": self._namespace} if self._namespace else {}
        tool = contract.TOOLS[contract.NAMESPACE_SUMMARY]
        try:
            result = await connection.call_tool(
                tool, arguments, deadline_s=HEALTH_DEADLINE_S, policy=READ
            )
            identity = identity_from(result.data, org=self._org, namespace=self._namespace)
        except GatewayError as error:
            self.note_error("health", error)
            raise
        self._identity = identity
        return identity

    def note_error(self, op: str, error: BaseException, *, sent_texts: Sequence[str] = ()) -> None:
        """Record an error met during ``op`` (the sweep notes its own here too) for diagnostics.

        ``sent_texts`` are texts the call carried: a message quoting one is withheld. The
        error is also kept in the state store, so a status or doctor run in another process
        sees what the sweep met; a store that cannot be written loses only that copy.
        """
        last = self._errors.note(op, error, sent_texts=sent_texts)
        if self._state is not None:
            with contextlib.suppress(sqlite3.Error):  # the in-process copy is still shown
                self._state.record_last_error(
                    at=last.at, op=last.op, kind=last.kind, message=last.message
                )

    def note_batch_budget(self, budget: Mapping[str, Any] | None) -> None:
        """The sweep's current batch budget, shown by diagnostics (LOOM-4)."""
        self._batch_budget = dict(budget) if budget is not None else None

    def diagnostics(self) -> dict[str, Any]:
        """What ``nerve memory status`` shows (LOOM-4). Never any message text."""
        catalog = self._catalog.latest if self._catalog else None
        catalog_error = self._catalog.last_error if self._catalog else None
        last = self._last_error()
        return {
            "backend": LOOM_BACKEND,
            "available": self.available,
            "gateway_url": self._gateway_url,
            "catalog": {
                "generation": catalog.generation if catalog else None,
                "lists_loom": bool(catalog and catalog.lists(LOOM_SERVER)),
                "loom_tools": sorted(self.agent_tools()),
                "read_error": catalog_error.reason if catalog_error else None,
            },
            "identity": self._identity_report(),
            "breaker": self._breaker_report(),
            "batch_budget": self._batch_budget,
            "last_error": last.as_dict() if last else None,
        }

    # --- inside -----------------------------------------------------------------------------

    def _last_error(self) -> LastError | None:
        """The newer of this process's last error and the one kept in the state store."""
        mine = self._errors.last
        kept = None
        if self._state is not None:
            try:
                row = self._state.last_error()
            except sqlite3.Error:
                row = None
            kept = LastError(*row) if row is not None else None
        if mine is None or (kept is not None and kept.at > mine.at):
            return kept
        return mine

    async def _recall_from_loom(self, connection: LoomConnection) -> tuple[str, tuple[str, ...]]:
        """Pack first; search when the pack brings nothing or is refused by policy (REC-1)."""
        deadline_at = self._clock() + RECALL_DEADLINE_S
        try:
            pack = await self._read(
                connection, contract.CONTEXT_PACK, pack_arguments(self._namespace), deadline_at
            )
            lines = pack_lines(pack.data)
            if lines:
                return "pack", lines
        except PolicyRefused as refused:
            self.note_error("recall", refused)
        search = await self._read(
            connection, contract.SEARCH_QUERY, search_arguments(self._namespace), deadline_at
        )
        return "search", search_lines(search.data)

    async def _read(
        self,
        connection: LoomConnection,
        op: str,
        arguments: Mapping[str, Any],
        deadline_at: float,
    ) -> ToolResult:
        """One read of the recall with what is left of its 5 s; ``NoAnswer`` when none is."""
        remaining = deadline_at - self._clock()
        if remaining <= 0:
            raise NoAnswer("the recall's 5 s passed before the fallback", deadline_s=0.0)
        return await connection.call_tool(
            contract.TOOLS[op], arguments, deadline_s=remaining, policy=READ
        )

    def _require_connection(self) -> LoomConnection:
        if self._stack is None:
            raise RuntimeError("LoomMemory is used outside its 'async with' block")
        if self._connection is None:
            raise MemoryBackendUnavailable(
                "memory.backend is loom but mcp_gateway_url is not set", backend=LOOM_BACKEND
            )
        return self._connection

    def _require_state(self) -> StateStore:
        if self._stack is None or self._state is None:
            raise RuntimeError("LoomMemory is used outside its 'async with' block")
        return self._state

    def _identity_report(self) -> dict[str, Any]:
        identity = self._identity
        return {
            "org": identity.org if identity else self._org,
            "org_source": identity.org_source if identity else _source(self._org),
            "namespace": identity.namespace if identity else self._namespace,
            "namespace_source": identity.namespace_source if identity else _source(self._namespace),
            "shared_namespaces": list(identity.shared_namespaces) if identity else None,
            "memory_count": identity.memory_count if identity else None,
        }

    def _breaker_report(self) -> dict[str, Any] | None:
        if self._connection is None:
            return None
        snapshot = self._connection.breaker.snapshot()
        closes_at = None
        if snapshot["state"] == "open":
            when = self._wall_clock() + snapshot["retry_in_s"]
            closes_at = datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
        return {**snapshot, "closes_at": closes_at}


def _source(override: str | None) -> str | None:
    """Before a probe: ``config`` for an override, else unknown until Loom is asked."""
    return "config" if override else None


async def _enter(stack: AsyncExitStack, resource: Any) -> Any:
    """Enter ``resource`` as an async context manager, or close it with the stack."""
    if hasattr(resource, "__aenter__"):
        return await stack.enter_async_context(resource)
    stack.push_async_callback(resource.aclose)
    return resource
