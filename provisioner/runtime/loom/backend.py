"""The Loom memory backend: startup recall, extraction, health and diagnostics (LOOM-1…LOOM-4).

``LoomMemory`` reaches Loom as the ``loom`` server of the gateway's catalog and makes only the
lifecycle calls (LOOM-1): the startup recall (``context.pack``, falling back to
``search.query``; REC-1…REC-4), one extraction call per batch the sweep hands it
(``memory.set_from_messages``; SWEEP-3), and the health probe (``namespace.summary``; LOOM-3);
and, for ``nerve memory migrate`` only, one keyed write per memory (``memory.set``; MIG-1).

It is built whatever the gateway's state (LOOM-2): with no gateway URL it has no connection
at all and reports itself unavailable; with a catalog that does not list ``loom`` its calls
fail with ``ServerNotListed``. A startup recall never raises for a gateway or Loom failure: it
answers "could not be recalled" (``Recall.recalled`` False), which is never the same as "no
memories", and freezes nothing. A successful recall is frozen per session in the state store
(REC-3), so every later prompt of that session — also after a restart — shows the same bytes;
off the event loop: a busy, full or damaged state leaves it unfrozen, never failed (REL-3).

Build it from plain values, from Nerve's own configuration (``from_settings``: the merged
mapping, or a config object of its shape) or from this package's ``Config`` (``from_config``);
all three hold the values to the same rules (NERVE-5). Use it as an async context manager, or
call ``open()`` where an engine starts and ``aclose()`` where it stops::

    async with LoomMemory.from_settings(settings, state_path=path) as memory:
        recall = await memory.startup_recall(session_id)

``open()`` reads the catalog once, so ``available`` answers from the start; ``aclose()`` closes
every client and file the backend opened, and may be called any number of times.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict
from typing import Any

import httpx

from provisioner.runtime.clock import Clock, Sleep
from provisioner.runtime.errors import FileFault, MemoryBackendUnavailable
from provisioner.runtime.gateway.catalog import CatalogServer, GatewayCatalog
from provisioner.runtime.gateway.client import EXTRACTION, READ, LoomConnection
from provisioner.runtime.gateway.errors import GatewayError, NoAnswer
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import extracted_from, extraction_arguments, identity_from
from provisioner.runtime.loom.diagnostics import agent_tools_of, diagnostics_report, newest_error
from provisioner.runtime.loom.recall import (
    RECALL_DEADLINE_S,
    FrozenRecalls,
    recall_from_loom,
    state_fault_of,
)
from provisioner.runtime.loom.report import ErrorRecord
from provisioner.runtime.loom.settings import LOOM_BACKEND, ConfigLike, checked_values, loom_values
from provisioner.runtime.loom.types import Extracted, Identity, MemoryWrite, Recall, WriteVerdict
from provisioner.runtime.loom.write import write_memory
from provisioner.runtime.memory_contract import LOOM_SERVER
from provisioner.runtime.state import StateBusyError, StateStore
from provisioner.runtime.transcripts import Message

EXTRACT_DEADLINE_S = 130.0  # SWEEP-3: a little past the gateway's 120 s call limit
HEALTH_DEADLINE_S = 5.0  # LOOM-3 (our choice): a read, bounded like the recall
RECALL_GUARD_S = 0.05  # REC-1 (our choice): a backstop past the 5 s, should the clock be off
IN_MEMORY_STATE = ":memory:"  # REC-3 holds only while the backend is open without a state file

NOT_RECALLED = Recall(items=(), recalled=False, source=None)  # REC-4
NOT_OPEN = "LoomMemory is not open: use it inside 'async with', or between open() and aclose()"

TransportFactory = Callable[[], httpx.AsyncBaseTransport]
StatePath = str | os.PathLike[str]


class LoomMemory:
    """Memory kept in Loom, reached through the MCP gateway (LOOM-1…LOOM-4, NERVE-5).

    Built from plain values: ``gateway_url`` (None or empty: no gateway, so unavailable),
    ``org`` and ``namespace`` (overrides of what Loom resolves), ``defer_extraction`` (the
    sweep's queued mode), ``sweep_concurrency`` (the sweep's most windows at once, SWEEP-14;
    None: the default), and where frozen recalls are kept — ``state`` (a store that stays the
    caller's) or ``state_path`` (a file the backend opens when opened and closes when closed);
    with neither, an in-memory store lives as long as the backend is open. ``ValueError``
    names the parameter of a value that breaks its rule (CONF-5, CONF-6). ``transport_factory``
    (each HTTP client's transport), ``clock`` (monotonic seconds), ``sleep``, ``wall_clock``
    (epoch seconds, for diagnostics) and ``recall_deadline_s`` are seams for tests.
    """

    def __init__(
        self,
        *,
        gateway_url: str | None = None,
        org: str | None = None,
        namespace: str | None = None,
        defer_extraction: bool = False,
        sweep_concurrency: int | None = None,
        state: StateStore | None = None,
        state_path: StatePath | None = None,
        transport_factory: TransportFactory | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        wall_clock: Callable[[], float] | None = None,
        recall_deadline_s: float | None = None,
    ) -> None:
        self._values = checked_values(
            gateway_url=gateway_url,
            org=org,
            namespace=namespace,
            defer_extraction=defer_extraction,
            sweep_concurrency=sweep_concurrency,
        )
        if state is not None and state_path is not None:
            raise ValueError("state, state_path: both given; expected one place for the state")
        self._gateway_url = self._values.gateway_url
        self._org = self._values.org
        self._namespace = self._values.namespace
        self._given_state = state
        self._state_path = state_path
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
        self._recall_deadline_s = recall_deadline_s or RECALL_DEADLINE_S
        self._frozen: FrozenRecalls | None = None
        self.state_fault: FileFault | None = None  # the last the recall met on its state (REL-3)
        # REL-3: the state file could not be opened; the recall runs on a stand-in, the sweep never
        self._state_unopened: FileFault | None = None

    @classmethod
    def from_settings(
        cls,
        settings: object,
        *,
        state_path: StatePath | None = None,
        state: StateStore | None = None,
        transport_factory: TransportFactory | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> LoomMemory:
        """The backend for Nerve's own configuration, whose ``memory.backend`` is ``loom``.

        ``settings`` is the mapping Nerve merges from its layers, or a config object of that
        shape (sections as attributes); ``memory.backend``, ``memory.loom.*`` (``org``,
        ``namespace``, ``defer_extraction``, ``sweep_concurrency``) and ``mcp_gateway_url``
        are read, nothing else. ``ValueError`` names the key of a value it cannot use, and a
        backend other than ``loom`` (LOOM-1); the other arguments are the constructor's.
        """
        return cls(
            **asdict(loom_values(settings)),
            state=state,
            state_path=state_path,
            transport_factory=transport_factory,
            clock=clock,
            sleep=sleep,
            wall_clock=wall_clock,
        )

    @classmethod
    def from_config(
        cls,
        config: ConfigLike,
        *,
        state: StateStore | None = None,
        state_path: StatePath | None = None,
        transport_factory: TransportFactory | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> LoomMemory:
        """The backend for this package's ``Config``; ``ValueError`` under another backend."""
        if config.memory_backend != LOOM_BACKEND:
            raise ValueError(
                f"memory.backend is {config.memory_backend!r}; LoomMemory serves only 'loom'"
            )
        return cls(
            gateway_url=config.mcp_gateway_url or None,
            org=config.loom.org,
            namespace=config.loom.namespace,
            defer_extraction=config.loom.defer_extraction,
            sweep_concurrency=config.loom.sweep_concurrency,
            state=state,
            state_path=state_path,
            transport_factory=transport_factory,
            clock=clock,
            sleep=sleep,
            wall_clock=wall_clock,
        )

    # --- lifecycle --------------------------------------------------------------------------

    async def open(self) -> LoomMemory:
        """Open the state and the gateway clients, and read the catalog once; returns self.

        Never fails for the gateway's state (LOOM-2), nor for a state file the machine will
        not let it use (REL-3: the recall runs unfrozen, ``state`` raises the fault). Raises
        ``RuntimeError`` while already open, and ``StateVersionError`` for a state file of a
        newer version; a failed open leaves nothing open. Opening again after ``aclose()`` is
        allowed.
        """
        if self._stack is not None:
            raise RuntimeError("LoomMemory is open already; close it before opening it again")
        stack = AsyncExitStack()
        try:
            if self._state is None:
                path = IN_MEMORY_STATE if self._state_path is None else self._state_path
                self._state = stack.enter_context(await self._open_state(path))
            self._frozen = FrozenRecalls(self._state, on_fault=self._note_state_fault)
            stack.push_async_callback(self._frozen.aclose)
            if self._gateway_url is not None:
                await self._open_gateway(stack, self._gateway_url)
        except BaseException:
            self._connection = self._frozen = None
            self._state = self._given_state
            await stack.aclose()
            raise
        self._stack = stack
        if self._catalog is not None:
            await self._catalog.current()
        return self

    async def _open_state(self, path: str | os.PathLike[str]) -> StateStore:
        """The state file at ``path``, opened off the loop; a stand-in in memory when the file
        is busy past its wait, full, unreadable or damaged (REL-3).

        The recall then runs unfrozen on the stand-in, and the fault is in ``state_fault``;
        ``state`` raises it, so a sweeper is never built on a state that keeps no watermark.
        A state written by a newer version still raises ``StateVersionError``, and a folder
        named as the state file raises what SQLite says of it: those are the host's to fix.
        """
        self._state_unopened = None
        try:
            return await asyncio.to_thread(StateStore, path)
        except (sqlite3.Error, OSError, StateBusyError) as error:
            fault = state_fault_of(error, path)
            if fault is None or os.path.isdir(path):  # a folder named as the state: the host's
                raise
        self._state_unopened = fault
        self._note_state_fault(fault)
        return StateStore(IN_MEMORY_STATE)

    async def aclose(self) -> None:
        """Close every HTTP client the backend opened, and the state file it opened itself.

        Safe to call any number of times, and before ``open()``. A ``state`` the caller gave
        stays open: it is the caller's.
        """
        stack, self._stack = self._stack, None
        self._connection = self._frozen = None
        self._state = self._given_state
        if stack is not None:
            await stack.aclose()

    async def __aenter__(self) -> LoomMemory:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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

    def catalog_server(self) -> CatalogServer | None:
        """The ``loom`` server of the last good catalog (its URL and tools), or None (NERVE-13)."""
        latest = self._catalog.latest if self._catalog is not None else None
        return latest.server(LOOM_SERVER) if latest is not None else None

    def agent_tools(self) -> frozenset[str]:
        """The Loom tools the catalog lists for the agent; empty without ``loom`` (TXT-3)."""
        return agent_tools_of(self._catalog)

    @property
    def state(self) -> StateStore:
        """The state store in use while open: frozen recalls, and what a ``Sweeper`` keeps.

        Raises the ``FileFault`` met when the state file could not be opened: the recall goes
        on without it, but nothing that keeps watermarks may use a stand-in (REL-2, REL-3).
        """
        if self._state_unopened is not None and self._stack is not None:
            raise self._state_unopened
        return self._require_state()

    @property
    def defer_extraction(self) -> bool:
        """Whether the sweep should queue its batches (``memory.loom.defer_extraction``)."""
        return self._values.defer_extraction

    @property
    def sweep_concurrency(self) -> int:
        """The most sessions a ``Sweeper`` sweeps at once (``memory.loom.sweep_concurrency``)."""
        return self._values.sweep_concurrency

    async def startup_recall(self, session_id: str) -> Recall:
        """The memories for a session's start, frozen for that session (REC-1…REC-4, REL-3).

        A recall given before (also by an earlier process on the same state file) is answered
        again. Otherwise Loom is asked; any failure answers ``NOT_RECALLED`` ("could not be
        recalled"), records the error for diagnostics and keeps nothing, so the next session
        start tries again. 5 s for the whole recall, the state's part included, which runs
        off the loop: a state that is busy, full or damaged leaves the recall unfrozen (the
        fault in ``state_fault``), never failed. Never raises for either.
        """
        kept = self._frozen  # made with the state, in open()
        if kept is None or self._stack is None:
            raise RuntimeError(NOT_OPEN)
        reads_until = self._clock() + self._recall_deadline_s  # Loom's reads, on self._clock
        until = asyncio.get_running_loop().time() + self._recall_deadline_s
        if (given := kept.given(session_id)) is not None:
            return given
        lookup = kept.frozen(session_id, until=until)
        if self._connection is None:
            return await lookup or NOT_RECALLED
        asked = (self._connection, self._namespace, self._clock, reads_until)
        try:
            async with asyncio.timeout_at(until + RECALL_GUARD_S):
                if (frozen := await lookup) is not None:
                    return frozen  # frozen before: Loom is not asked (REC-3)
                source, lines = await recall_from_loom(*asked, self._note_recall_error)
        except TimeoutError:
            passed = f"the recall passed its {self._recall_deadline_s:g} s"
            self._note_recall_error(NoAnswer(passed, deadline_s=self._recall_deadline_s))
            return NOT_RECALLED
        except GatewayError as error:
            self._note_recall_error(error)
            return NOT_RECALLED
        recall = Recall(items=lines, recalled=True, source=source)
        return kept.keep(session_id, recall, now=self._wall_clock(), until=until)

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

    async def set_memory(self, write: MemoryWrite) -> WriteVerdict:
        """One keyed write (MIG-1): see ``write_memory``; no gateway: MemoryBackendUnavailable."""
        return await write_memory(
            self._require_connection(), write, namespace=self._namespace, note_error=self.note_error
        )

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
                    at=last.at, op=last.op, kind=last.kind, message=last.message, code=last.code
                )

    def note_batch_budget(self, budget: Mapping[str, Any] | None) -> None:
        """The sweep's current batch budget, shown by diagnostics (LOOM-4)."""
        self._batch_budget = dict(budget) if budget is not None else None

    def diagnostics(self) -> dict[str, Any]:
        """What ``nerve memory status`` shows (LOOM-4). Never any message text."""
        return diagnostics_report(
            backend=LOOM_BACKEND,
            available=self.available,
            gateway_url=self._gateway_url,
            catalog=self._catalog,
            connection=self._connection,
            identity=self._identity,
            overrides=(self._org, self._namespace),
            batch_budget=self._batch_budget,
            last_error=newest_error(self._errors.last, self._state),
            wall_clock=self._wall_clock,
        )

    # --- inside -----------------------------------------------------------------------------

    def _note_state_fault(self, fault: FileFault) -> None:
        """What the recall met on its state: shown by diagnostics, never written to that state."""
        self.state_fault = fault
        self._errors.note("recall", fault)

    def _note_recall_error(self, error: BaseException) -> None:
        """``note_error`` for the recall: the state's copy is written off the loop (REL-3)."""
        last = self._errors.note("recall", error)
        if self._frozen is not None:
            self._frozen.keep_error(last, wait_s=self._recall_deadline_s)

    def _require_connection(self) -> LoomConnection:
        if self._stack is None:
            raise RuntimeError(NOT_OPEN)
        if self._connection is None:
            raise MemoryBackendUnavailable(
                "memory.backend is loom but mcp_gateway_url is not set", backend=LOOM_BACKEND
            )
        return self._connection

    def _require_state(self) -> StateStore:
        if self._stack is None or self._state is None:
            raise RuntimeError(NOT_OPEN)
        return self._state


async def _enter(stack: AsyncExitStack, resource: Any) -> Any:
    """Enter ``resource`` as an async context manager, or close it with the stack."""
    if hasattr(resource, "__aenter__"):
        return await stack.enter_async_context(resource)
    stack.push_async_callback(resource.aclose)
    return resource
