"""Startup recall: what to ask Loom, and how its answers become safe lines (REC-1, REC-2, REC-5).

The backend asks ``context.pack`` in startup mode for the memories section; when that brings
no memories, or the gateway's policy refuses it, it asks ``search.query`` instead (REC-1).
This module holds the arguments of both calls and turns their answers into the recall's
items: each memory exactly one line made safe by ``provisioner.runtime.loom.recalled`` —
pack text keeps Loom's entities, search text is escaped the same way (REC-2) — without
duplicates, and no more of them than fit the session-context block.

An answer may list any number of memories, and the recall runs on the event loop that serves
Nerve's sessions and times the recall's own 5 s read. So the work is linear (repeats are found
in sets), stops at the first line the block has no room for, and gives the loop back every
``YIELD_AFTER_S`` however many memories clean to nothing (REC-5). For the same reason
``FrozenRecalls`` never waits for the state file on the loop (REL-3): it writes in a worker
thread, and reads there whenever reading on the loop could wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from provisioner.runtime.clock import Clock
from provisioner.runtime.errors import FileFault, file_fault
from provisioner.runtime.gateway.client import READ, LoomConnection
from provisioner.runtime.gateway.errors import BrokenAnswer, NoAnswer, PolicyRefused
from provisioner.runtime.gateway.protocol import ToolResult
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.context_block import ITEM_PREFIX
from provisioner.runtime.loom.recalled import BLOCK_MAX_BYTES, line_bytes, sanitize_recalled
from provisioner.runtime.loom.report import LastError
from provisioner.runtime.loom.types import Recall
from provisioner.runtime.sqlite_file import IN_MEMORY
from provisioner.runtime.state import FrozenRecall, ReadOnlyState, StateBusyError, StateStore

RECALL_DEADLINE_S = 5.0  # REC-1: the whole read, pack and fallback together
RECALL_SEARCH_TOP_K = 10  # REC-1: results the fallback search asks for (in the fixture)
RECALL_SEARCH_QUERY = "facts, preferences and decisions worth knowing at the start of a session"
PACK_MODE = "startup"  # REC-1
PACK_SECTIONS = ("memories",)  # REC-1: the memories section only
# REC-5 (our choice): the longest the line-making holds the loop before it yields, and how many
# memories are read through the contract at a time.
YIELD_AFTER_S = 0.01
RECORDS_PER_SLICE = 256
# The clock the line-making reads to know how long it has held the loop (seconds). Tests put
# a clock of their own here, to count the memories made between yields instead of timing them.
hold_clock: Callable[[], float] = time.perf_counter
# REL-3 (our choice): how long past the recall's budget the loop still waits for a state step
# the worker has not finished (a flush to a slow disk); the step is then left to finish alone.
STATE_GUARD_S = 0.05
KEPT_SESSIONS = 1024  # REC-3 (our choice): sessions whose recall a process remembers

T = TypeVar("T")

_PACK_ITEMS = "sections.memories.items[]"
_SEARCH_RESULTS = "results[]"


def pack_arguments(namespace: str | None) -> dict[str, Any]:
    """The ``context.pack`` arguments of a startup recall."""
    arguments: dict[str, Any] = {"mode": PACK_MODE, "sections": list(PACK_SECTIONS)}
    if namespace:
        arguments["namespace"] = namespace
    return arguments


def search_arguments(namespace: str | None) -> dict[str, Any]:
    """The ``search.query`` arguments of the recall's fallback."""
    arguments: dict[str, Any] = {"query": RECALL_SEARCH_QUERY, "top_k": RECALL_SEARCH_TOP_K}
    if namespace:
        arguments["namespace"] = namespace
    return arguments


async def recall_from_loom(
    connection: LoomConnection,
    namespace: str | None,
    clock: Clock,
    deadline_at: float,
    note_refused: Callable[[PolicyRefused], object],
) -> tuple[str, tuple[str, ...]]:
    """The source and lines of a recall: the pack first; the search when the pack brings
    nothing or the gateway's policy refuses it (REC-1), noted through ``note_refused``.

    Both reads end by ``deadline_at`` on ``clock`` (monotonic seconds). Raises the gateway
    client's outcome classes, ``NoAnswer`` when no time is left for the fallback.
    """
    try:
        pack = await _read(
            connection, contract.CONTEXT_PACK, pack_arguments(namespace), deadline_at, clock
        )
        lines = await pack_lines(pack.data)
        if lines:
            return "pack", lines
    except PolicyRefused as refused:
        note_refused(refused)
    search = await _read(
        connection, contract.SEARCH_QUERY, search_arguments(namespace), deadline_at, clock
    )
    return "search", await search_lines(search.data)


async def _read(
    connection: LoomConnection, op: str, arguments: dict[str, Any], deadline_at: float, clock: Clock
) -> ToolResult:
    """One read of the recall with what is left of its 5 s; ``NoAnswer`` when none is."""
    remaining = deadline_at - clock()
    if remaining <= 0:
        raise NoAnswer("the recall's 5 s passed before the fallback", deadline_s=0.0)
    return await connection.call_tool(
        contract.TOOLS[op], arguments, deadline_s=remaining, policy=READ
    )


async def pack_lines(answer: Any) -> tuple[str, ...]:
    """The safe lines of a pack's memories (already escaped by Loom); empty when none.

    Raises ``BrokenAnswer`` when the answer is not of the contract's shape.
    """
    return await _safe_lines(answer, contract.CONTEXT_PACK, _PACK_ITEMS, "text", source="pack")


async def search_lines(answer: Any) -> tuple[str, ...]:
    """The safe lines of a search's results (raw text, escaped here); empty when it abstained.

    Raises ``BrokenAnswer`` when the answer is not of the contract's shape.
    """
    if contract.field(answer, contract.SEARCH_QUERY, "abstained") is True:
        return ()
    return await _safe_lines(
        answer, contract.SEARCH_QUERY, _SEARCH_RESULTS, "content_excerpt", source="search"
    )


async def _safe_lines(
    answer: Any, op: str, list_path: str, text_field: str, *, source: str
) -> tuple[str, ...]:
    """One sanitized line per memory, skipping non-text, empty lines and repeated keys/lines.

    Whole lines are kept up to the block's byte cap (REC-2), the way ``fit_block`` keeps them,
    so a frozen recall never holds more than the session-context block can show; the memories
    after the first line that does not fit are never cleaned, nor read (REC-5).
    """
    names = (text_field, "memory_key")
    listed = _listed(answer, op, list_path)
    lines: list[str] = []
    seen_keys: set[str] = set()
    seen_lines: set[str] = set()
    budget = BLOCK_MAX_BYTES
    held_since = hold_clock()
    # One slice even for an empty list, so the contract checks the fields named here.
    for start in range(0, max(len(listed), 1), RECORDS_PER_SLICE):
        piece = _nested(list_path, listed[start : start + RECORDS_PER_SLICE])
        for entry in contract.records(piece, op, list_path, names):
            if hold_clock() - held_since > YIELD_AFTER_S:
                await asyncio.sleep(0)
                held_since = hold_clock()
            text, key = entry[text_field], entry["memory_key"]
            if not isinstance(text, str):
                continue
            if isinstance(key, str):
                if key in seen_keys:
                    continue
                seen_keys.add(key)
            line = sanitize_recalled(text, source=source)
            if not line or line in seen_lines:
                continue
            size = line_bytes(ITEM_PREFIX + line)
            if size > budget:
                return tuple(lines)
            seen_lines.add(line)
            lines.append(line)
            budget -= size
    return tuple(lines)


def _listed(answer: Any, op: str, list_path: str) -> list[Any]:
    """The list at ``list_path`` (``a.b[]``) of ``op``'s answer; an absent list is empty.

    ``contract.records`` reads a list whole, which for a long one would hold the loop, so the
    list is found here with the same rules — an object at every step, else ``BrokenAnswer``;
    a missing step or a null is no list — and read through ``contract.records`` a slice at a
    time (see ``_nested``), which checks each memory and the fields named.
    """
    value: Any = answer
    steps = list_path.removesuffix("[]").split(".")
    for depth, step in enumerate(steps):
        if not isinstance(value, dict):
            where = ".".join(steps[:depth]) or "the answer"
            raise BrokenAnswer(f"{op}: {where} is not an object")
        value = value.get(step)
        if value is None:
            return []
    if not isinstance(value, list):
        raise BrokenAnswer(f"{op}: {list_path} is not a list")
    return value


def _nested(list_path: str, items: list[Any]) -> dict[str, Any]:
    """An answer holding just ``items`` at ``list_path``, for ``contract.records`` to read."""
    value: Any = items
    for step in reversed(list_path.removesuffix("[]").split(".")):
        value = {step: value}
    return value


class FrozenRecalls:
    """The recalls frozen for sessions, kept without the event loop ever waiting (REC-3, REL-3).

    A write on the state file may wait: for a lock another process holds (SQLite waits up to
    its busy timeout), for the disk (each commit is flushed), on a damaged page. Nerve's
    sessions share the loop the recall runs on, so no write runs there: each step runs in one
    worker thread of this object's own and waits for a lock no longer than what is left of
    the recall's budget. A step the state cannot take hands its ``FileFault`` to ``on_fault``
    (on the loop); nothing here raises for the state.

    A lookup is a read, and a read of the state waits for no writer (the file is in WAL mode),
    so handing each one to the worker cost the recall more than the read itself. ``frozen``
    reads on the loop whenever that cannot wait: through a read-only connection of its own
    whose busy timeout is 0 (SQLite answers "busy" at once instead of waiting), or, for an
    in-memory store, only while no other thread holds it. Whatever stops that read — busy, or
    a fault such as a damaged page — sends the lookup to the worker, which waits within the
    budget and names the fault. The loop reads only while the worker is idle, or busy with a
    freeze that holds the write lock already (it waits for no other process then, and a
    reader never waits for it), so a lookup never overtakes a step that may still wait:
    behind a freeze waiting for a lock, it waits too, off the loop. One wait the loop cannot
    cut: SQLite retries a read on its own (for up to about 10 s) while another process holds
    a lock of the WAL index a reader needs, which SQLite holds only for an instant (a writer
    restarting the log, a checkpoint moving its marks); only a process stopped in that
    instant can make the loop wait.

    ``given`` answers what this process already gave the session, ``frozen`` what the state
    file froze for it (when the worker reads it, the loop stops waiting ``STATE_GUARD_S`` past
    the budget, whatever the thread is doing). ``keep`` makes a new recall the session's at once
    — the first one kept in this process wins — and freezes it in the background, so the
    session never waits for the state to be written. The freeze goes to the worker once the
    loop has handed the answer on (a loop turn later; ``aclose`` hands over any still kept),
    so neither the answer nor another session's lookup in the same turn waits behind a
    thread starting on it. A busy, full or damaged state leaves the recall unfrozen, still
    the same bytes on every rebuild in this process, and the next process recalls it anew.
    Should another process have frozen the session meanwhile, the one it froze is what later
    rebuilds show: the first one frozen wins. At most ``KEPT_SESSIONS`` sessions are
    remembered, the least recently asked for leaving first.

    A state file is reached through a connection of the worker's own, so its busy timeout can
    be cut to each step's share without shortening the waits of the sweep or of status on
    the caller's store; the worker opens the loop's reader beside it, on its first step (the
    lookups before it run in the worker). An in-memory store has no other process to wait
    for; it is used as it is. ``aclose()`` lets the steps under way end (each within its
    bound) and closes both connections.
    """

    def __init__(self, state: StateStore, *, on_fault: Callable[[FileFault], object]) -> None:
        self._state = state
        self._own: StateStore | None = None
        self._reader: ReadOnlyState | None = None  # the loop's; opened by the worker
        self._on_fault = on_fault
        self._given: OrderedDict[str, Recall] = OrderedDict()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recall-state")
        self._last_step: Future[Any] | None = None  # the worker is idle once it is done
        self._last_step_locked: threading.Event | None = None  # set once it holds the write lock
        # freezes for the worker, each with its cue that it holds the write lock
        self._handing_over: list[tuple[Callable[[], None], threading.Event]] = []

    def given(self, session_id: str) -> Recall | None:
        """The recall this process gave the session already, if it remembers one."""
        given = self._given.get(session_id)
        if given is not None:
            self._given.move_to_end(session_id)
        return given

    def frozen(self, session_id: str, *, until: float) -> Awaitable[Recall | None]:
        """The session's recall frozen in the state file; None when none is, or when the state
        cannot say within the budget (``until``, on the loop's clock).

        Read on the loop when that cannot wait (the awaitable is then done already), else
        by the worker.
        """
        found = self._read_on_loop(session_id)
        if found is _Unread.UNREAD:
            return self._frozen_by_worker(session_id, until)
        answered: asyncio.Future[Recall | None] = asyncio.get_running_loop().create_future()
        answered.set_result(self._found(session_id, found))
        return answered

    async def _frozen_by_worker(self, session_id: str, until: float) -> Recall | None:
        found = await self._step(until, lambda store: store.frozen_recall(session_id))
        return self._found(session_id, found)

    def _found(self, session_id: str, frozen: FrozenRecall | None) -> Recall | None:
        if frozen is None:
            return None
        return self._remember(session_id, Recall(frozen.items, True, frozen.source))

    def _read_on_loop(self, session_id: str) -> FrozenRecall | _Unread | None:
        """The lookup without leaving the loop; ``UNREAD`` when it could wait, or SQLite
        refused it (busy, or a fault the worker's read will name)."""
        step, locked = self._last_step, self._last_step_locked
        if step is not None and not step.done() and not (locked is not None and locked.is_set()):
            return _Unread.UNREAD  # the worker may wait for a lock: the lookup queues behind it
        if self._state.path == IN_MEMORY:
            read, frozen = self._state.frozen_recall_at_once(session_id)
            if not read:
                return _Unread.UNREAD  # reading now would wait for another thread of this process
            return frozen
        if self._reader is None:
            return _Unread.UNREAD  # the worker opens the reader on its first step
        try:
            return self._reader.frozen_recall(session_id)
        except sqlite3.Error:
            return _Unread.UNREAD  # refused: the worker's read names the fault

    def keep(self, session_id: str, recall: Recall, *, now: float, until: float) -> Recall:
        """Make ``recall`` the session's and freeze it in the background; answers the session's
        recall, which is one kept before in this process if there is one."""
        given = self._given.get(session_id)
        if given is not None:
            return given
        loop = asyncio.get_running_loop()
        wait_s = max(until - loop.time(), 0.0)
        items, source = recall.items, recall.source or ""
        locked = threading.Event()

        def freeze(store: StateStore) -> None:
            frozen = store.freeze_recall(
                session_id, source=source, items=items, now=now, on_locked=locked.set
            )
            if (frozen.items, frozen.source) != (items, source):  # another process's came first
                adopted = Recall(frozen.items, True, frozen.source)
                loop.call_soon_threadsafe(self._adopt, session_id, adopted)

        def freeze_or_say_why() -> None:  # the loop hears of it only when there is news
            try:
                self._bounded(wait_s, freeze)
            except (sqlite3.Error, OSError, StateBusyError) as error:
                fault = state_fault_of(error, self._state.path)
                if fault is None:
                    raise
                loop.call_soon_threadsafe(self._on_fault, fault)

        if not self._handing_over:
            loop.call_soon(self._hand_over)
        self._handing_over.append((freeze_or_say_why, locked))
        return self._remember(session_id, recall)

    def keep_error(self, last: LastError, *, wait_s: float) -> None:
        """Copy ``last`` into the state file when the worker gets to it; the loop waits for
        nothing, and a state that cannot take it loses only that copy."""

        def keep(store: StateStore) -> None:
            at, op, kind, message, code = last.at, last.op, last.kind, last.message, last.code
            store.record_last_error(at=at, op=op, kind=kind, message=message, code=code)

        self._submit(self._quietly, wait_s, keep)

    async def settled(self) -> None:
        """Wait until every state step handed to the worker so far has run, and what those
        steps told the loop (a recall another process froze first, REC-3) has arrived; the
        loop keeps running meanwhile. The worker runs its steps in order, so a step submitted
        now finishes after them, and its answer reaches the loop after their news."""
        self._hand_over()
        await asyncio.wrap_future(self._submit(_nothing))

    async def aclose(self) -> None:
        """Wait (off the loop) for the steps under way, then close the worker's connections."""
        self._hand_over()
        self._submit(self._close_own)
        await asyncio.to_thread(self._worker.shutdown)

    def _hand_over(self) -> None:
        """Give the worker the freezes kept since the loop last came here."""
        freezes, self._handing_over = self._handing_over, []
        for freeze, locked in freezes:
            self._submit(freeze)
            self._last_step_locked = locked

    def _submit(self, call: Callable[..., T], *arguments: Any) -> Future[T]:
        """``call`` on the worker, after every step handed over before it."""
        step = self._worker.submit(call, *arguments)
        self._last_step, self._last_step_locked = step, None
        return step

    def _remember(self, session_id: str, recall: Recall) -> Recall:
        self._given[session_id] = recall
        if len(self._given) > KEPT_SESSIONS:
            self._given.popitem(last=False)
        return recall

    def _adopt(self, session_id: str, frozen: Recall) -> None:
        """On the loop: the recall another process froze first is the session's from now on."""
        if session_id in self._given:
            self._given[session_id] = frozen

    async def _step(self, until: float, call: Callable[[StateStore], T]) -> T | None:
        loop = asyncio.get_running_loop()
        wait_s = max(until - loop.time(), 0.0)
        try:
            async with asyncio.timeout_at(until + STATE_GUARD_S):
                return await asyncio.wrap_future(self._submit(self._bounded, wait_s, call))
        except TimeoutError:
            self._on_fault(FileFault(self._state.path, "busy", "no answer in time"))
        except (sqlite3.Error, OSError, StateBusyError) as error:
            fault = state_fault_of(error, self._state.path)
            if fault is None:
                raise
            self._on_fault(fault)
        return None

    def _bounded(self, wait_s: float, call: Callable[[StateStore], T]) -> T:
        """``call`` on the worker's store, waiting at most ``wait_s`` for another's lock."""
        if self._state.path == IN_MEMORY:
            return call(self._state)
        if self._own is None:
            self._own = StateStore(self._state.path)
        if self._reader is None:
            self._reader = _open_reader(self._state.path)
        self._own.wait_for_locks(wait_s)
        return call(self._own)

    def _quietly(self, wait_s: float, call: Callable[[StateStore], object]) -> None:
        with contextlib.suppress(sqlite3.Error, OSError, StateBusyError):
            self._bounded(wait_s, call)

    def _close_own(self) -> None:
        own, self._own = self._own, None
        reader, self._reader = self._reader, None
        if own is not None:
            own.close()
        if reader is not None:
            reader.close()


class _Unread(enum.Enum):
    """The loop did not read the state: it could have waited, or SQLite refused the read."""

    UNREAD = enum.auto()


def _nothing() -> None:
    """A step that does nothing: where it stands in the worker's queue is the point."""


def _open_reader(path: str) -> ReadOnlyState | None:
    """The state file read only, never waiting for a lock, for the loop's lookups; None when
    the file will not open so, and the worker reads them."""
    try:
        return ReadOnlyState(path, wait_s=0, any_thread=True)
    except (sqlite3.Error, OSError, ValueError):
        return None


def state_fault_of(error: BaseException, path: str | os.PathLike[str]) -> FileFault | None:
    """``error`` met on the state file as a ``FileFault``; None when it is no file fault."""
    if isinstance(error, StateBusyError):  # another process kept it locked while it was opened
        return FileFault(path, "busy")
    return file_fault(error, path)
