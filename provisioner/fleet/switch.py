"""``nerve-provisioner fleet switch --to loom``: a fleet moved from memU to Loom in one process
(FLEET-7, FLEET-8, FLEET-9).

Each instance goes through four phases, in this order, each the same work as the command a
person would run on one instance:

1. ``config``: the switch written where the configuration is read (``write_switch``); a
   locked instance (CONF-3) stops here, reported as the platform's to switch, nothing of it
   touched;
2. ``workspace``: re-worded for Loom with the agents' edits merged, exactly as ``fleet
   update`` does it (``FleetRun.one`` with ``memory_backend: loom``);
3. ``migrate``: memU's memories written into Loom once each (``Migration``: keyed writes
   ``memu-<id>``, the ledger in the instance's state file), when the instance has a memU store;
4. ``sweep``: its conversations swept from where memU stopped (``Sweeper`` over Nerve's
   ``nerve.db``, started at memU's ``last_memorized_at``), when it has a ``nerve.db``.

**Exactly once (FLEET-8).** Nothing here keeps its own record of what went to Loom: the
migration's ledger and the sweep's watermarks, each written in its own transaction after Loom
answered, are that record, so a process killed at any moment loses nothing, and the next run
sends again at most the write or the windows that were in flight (Loom answers a keyed write
sent twice ``duplicate``). Beside the state file, ``fleet-switch.json`` notes each phase once
it is done, written atomically; an instance whose note says it is switched costs the next run
one read of that file. A phase not yet noted is run again whole, which its own record makes
cheap: the config written already is not written again, files already worded are kept, items
in the ledger and messages behind a watermark are passed over.

**Fast (FLEET-9).** ``jobs`` instances run at once, spread over a few event loops, each in a
thread of this one process (an instance's state file commits durably, a wait on the disk that
holds no lock of Python's, so several loops overlap what one loop would queue). Every
instance's calls go through one ``FleetBudget`` (``switch_budget``), and each loop reaches a
gateway through one Loom backend (``SharedLoom``: one catalog, one breaker, one connection
pool), so a thousand instances' second-long extractions overlap instead of queueing, and no
instance costs a process. The workspace phase, CPU work without waiting, runs on a few
threads beside the loops, with the renders shared across the fleet (``RenderCache``).

An instance that fails is reported with one line and the others go on. ``KILL_AT_ENV`` is a
test hook (FLEET-8's kill-at-every-step test): set to N, the process kills itself with SIGKILL
right after the N-th step — a phase noted, or a call Loom answered before its answer is
recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from provisioner.base.errors import UserError
from provisioner.base.files import write_atomically
from provisioner.config.loader import load_config
from provisioner.config.local_file import SWITCH_BACKEND, switch_line, write_switch
from provisioner.fleet.run import CONFLICT, ERROR, FleetRun, error_line
from provisioner.fleet.switch_budget import FLEET_MAX_CALLS, FleetBudget, FleetLoom
from provisioner.fleet.switch_inventory import MEMU_DB_FILE, SwitchEntry
from provisioner.runtime.face import (
    EXIT_TRY_LATER,
    FileFault,
    OperatorMustAct,
    ProvisionerError,
    faults_named,
    file_fault,
)

SWITCHED = "switched"  # FLEET-8: the statuses of an instance
ALREADY_SWITCHED = "already_switched"
CONFLICT_LEFT = CONFLICT  # switched, a workspace file left in conflict for a person
INCOMPLETE = "incomplete"  # memories or messages left for the next run
LOCKED = "locked"  # the platform's to switch (CONF-3); nothing touched
FAILED = ERROR
STATUSES = (SWITCHED, ALREADY_SWITCHED, CONFLICT_LEFT, INCOMPLETE, LOCKED, FAILED)
PHASES = ("config", "workspace", "migrate", "sweep")  # FLEET-7, in their order
JOURNAL_FILE = "fleet-switch.json"  # FLEET-8: beside the instance's state file
JOURNAL_SCHEMA = 1
DEFAULT_SWITCH_JOBS = 32  # FLEET-9 (our choice): instances at once; their calls share a budget
WORKER_LOOPS = 4  # FLEET-9 (our choice): event loops, each in a thread, sharing the budget
STOP_POLL_S = 0.1  # our choice: how soon a loop sees an interrupt
WORKSPACE_THREADS = 2  # our choice: the re-wording is CPU work; the renders are shared
SWEEP_ROUNDS = 3  # our choice: sweeps per instance while batches were turned away
SQLITE_DSN_PREFIX = "sqlite:///"  # NERVE-5: how Nerve names memU's store
KILL_AT_ENV = "NERVE_PROVISIONER_SWITCH_KILL_AT"  # FLEET-8's test hook (see the docstring)
POOL_CONNECTIONS = FLEET_MAX_CALLS  # FLEET-9: one connection per call the budget lets fly
UNREACHED = frozenset({"breaker_open", "no_answer", "unreachable", "unavailable"})


@dataclass
class InstanceOutcome:
    """One instance's status, what each phase did, what it lacked, and its error line."""

    instance: SwitchEntry
    status: str = SWITCHED
    phases: dict[str, Any] = field(default_factory=dict)
    lacked: list[str] = field(default_factory=list)
    error: str = ""
    busy: bool = False  # a file busy, or memory not reached: try again later

    def as_dict(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "workspace": self.instance.name,
            "status": self.status,
            "phases": self.phases,
            "lacked": self.lacked,
        }
        if self.error:
            item["error"] = self.error
        return item


class Steps:
    """Counts the steps of a run; with ``kill_at`` set, SIGKILLs the process at that step."""

    def __init__(self, kill_at: int | None = None) -> None:
        self._kill_at = kill_at
        self._lock = threading.Lock()
        self.count = 0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Steps:
        value = env.get(KILL_AT_ENV, "").strip()
        return cls(int(value) if value.isdigit() and int(value) > 0 else None)

    def __call__(self) -> None:
        with self._lock:
            self.count += 1
            reached = self.count == self._kill_at
        if reached:
            os.kill(os.getpid(), signal.SIGKILL)


class Journal:
    """``fleet-switch.json``: the phases of one instance done so far (FLEET-8)."""

    def __init__(self, state_path: Path) -> None:
        self.path = state_path.parent / JOURNAL_FILE
        self.done: list[str] = []
        try:
            with faults_named(self.path):
                text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            data = json.loads(text)
        except ValueError:
            return  # not ours to trust: every phase runs again, each from its own record
        if isinstance(data, dict) and data.get("schema") == JOURNAL_SCHEMA:
            self.done = [phase for phase in data.get("done", []) if phase in PHASES]

    @property
    def switched(self) -> bool:
        return all(phase in self.done for phase in PHASES)

    def note(self, phase: str) -> bool:
        """Note ``phase`` as done; False when it was noted before (nothing written)."""
        if phase in self.done:
            return False
        self.done.append(phase)
        body = {"schema": JOURNAL_SCHEMA, "to": SWITCH_BACKEND, "done": self.done}
        with faults_named(self.path):
            write_atomically(self.path, json.dumps(body).encode("utf-8"), 0o644)
        return True


class SharedLoom:
    """One Loom backend per gateway and Loom settings, shared by every instance of a loop that
    names them (FLEET-9): one catalog, one breaker and one pool of connections to the gateway
    for hundreds of instances, instead of a client, a catalog read and sockets of their own
    each.

    The backend keeps no instance's state: each instance's migration ledger and sweep
    watermarks go to its own state file, handed to ``Migration`` and ``Sweeper`` directly;
    the backend's own errors are kept in memory for this run only. Its pool holds
    ``POOL_CONNECTIONS`` connections, one for each call the fleet's budget lets fly.
    """

    def __init__(self) -> None:
        self._opened: dict[tuple[Any, ...], Any] = {}
        self._opening = asyncio.Lock()

    async def memory_for(self, config: Any) -> Any:
        """The open backend for ``config``'s gateway and Loom settings."""
        from provisioner.runtime.face import LoomMemory

        key = (
            config.mcp_gateway_url,
            config.loom.org,
            config.loom.namespace,
            config.loom.defer_extraction,
            config.loom.sweep_concurrency,
        )
        async with self._opening:
            if key not in self._opened:
                memory = LoomMemory(
                    gateway_url=key[0] or None,
                    org=key[1],
                    namespace=key[2],
                    defer_extraction=key[3],
                    sweep_concurrency=key[4],
                    transport_factory=_pooled_transport,
                )
                self._opened[key] = await memory.open()
            return self._opened[key]

    async def aclose(self) -> None:
        opened, self._opened = list(self._opened.values()), {}
        for memory in opened:
            await memory.aclose()


def _pooled_transport() -> httpx.AsyncBaseTransport:
    limits = httpx.Limits(
        max_connections=POOL_CONNECTIONS, max_keepalive_connections=POOL_CONNECTIONS
    )
    return httpx.AsyncHTTPTransport(trust_env=False, limits=limits)


@dataclass
class FleetSwitch:
    """Switches instances to Loom (see the module docstring). ``gateway`` is ``--gateway``."""

    gateway: str | None = None
    jobs: int = DEFAULT_SWITCH_JOBS
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    budget: FleetBudget | None = None
    steps: Steps = field(default_factory=Steps)
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self._fleet = FleetRun(update=True, env=self.env)
        self._threads: ThreadPoolExecutor | None = None

    async def all(
        self,
        instances: Sequence[SwitchEntry],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[InstanceOutcome]:
        """Every instance's outcome, in the inventory's order.

        ``jobs`` instances at once, spread over up to ``WORKER_LOOPS`` event loops, each in a
        thread of its own: an instance's state file commits durably (a wait on the disk that
        holds no lock of Python's), so several loops overlap those waits where one loop would
        queue them. The loops share the budget and take the next instance as a lane frees.
        Cancelled (an interrupt), every loop cancels its instances, which stop where their
        records stand, and the cancellation goes on once they all have.
        """
        if self.budget is None:
            self.budget = FleetBudget()
        loops = max(1, min(WORKER_LOOPS, self.jobs, len(instances)))
        lanes = -(-max(1, self.jobs) // loops)
        outcomes: list[InstanceOutcome | None] = [None] * len(instances)
        claimed = iter(range(len(instances)))
        lock = threading.Lock()
        stop = threading.Event()
        finished = 0

        def claim() -> int | None:
            with lock:
                return next(claimed, None)

        def done(index: int, outcome: InstanceOutcome) -> None:
            nonlocal finished
            with lock:
                outcomes[index] = outcome
                finished += 1
                if progress is not None:
                    progress(finished, len(instances))

        def run_loop() -> None:
            asyncio.run(self._worker(instances, claim, done, lanes, stop))

        self._threads = ThreadPoolExecutor(WORKSPACE_THREADS, thread_name_prefix="switch")
        workers = ThreadPoolExecutor(loops, thread_name_prefix="switch-loop")
        try:
            running = [workers.submit(run_loop) for _ in range(loops)]
            try:
                await asyncio.gather(*(asyncio.wrap_future(future) for future in running))
            except asyncio.CancelledError:
                stop.set()
                raise
        finally:
            stop.set()
            workers.shutdown(wait=True)
            self._threads.shutdown(wait=True, cancel_futures=True)
        return [outcome for outcome in outcomes if outcome is not None]

    async def _worker(
        self,
        instances: Sequence[SwitchEntry],
        claim: Callable[[], int | None],
        done: Callable[[int, InstanceOutcome], None],
        lanes: int,
        stop: threading.Event,
    ) -> None:
        """One loop's share: ``lanes`` instances at once, each lane taking the next one."""
        looms = SharedLoom()

        async def lane() -> None:
            while not stop.is_set() and (index := claim()) is not None:
                done(index, await self.one(instances[index], looms))

        tasks = [asyncio.create_task(lane()) for _ in range(lanes)]
        try:
            while not all(task.done() for task in tasks):
                await asyncio.wait(tasks, timeout=STOP_POLL_S)
                if stop.is_set():
                    for task in tasks:
                        task.cancel()
            for task in tasks:
                if not task.cancelled() and (error := task.exception()) is not None:
                    raise error
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await looms.aclose()

    async def one(self, instance: SwitchEntry, looms: SharedLoom) -> InstanceOutcome:
        """One instance's outcome; a failure is its ``error`` outcome, never raised."""
        outcome = InstanceOutcome(instance)
        try:
            await self._switch(instance, looms, outcome)
        except ProvisionerError as error:
            outcome.status, outcome.busy = FAILED, _held(error)
            # A state file of a newer version, say: the line names the state file it is about.
            shown = f"{instance.state}: " if isinstance(error, OperatorMustAct) else ""
            outcome.error = shown + error_line(error)
        except (OSError, sqlite3.Error) as error:
            named = file_fault(error, getattr(error, "filename", None) or instance.state)
            if named is None:
                raise
            outcome.status, outcome.error = FAILED, error_line(named)
            outcome.busy = named.kind == "busy"
        return outcome

    async def _switch(
        self, instance: SwitchEntry, looms: SharedLoom, outcome: InstanceOutcome
    ) -> None:
        journal = Journal(instance.state)
        if journal.switched:  # FLEET-8: one quick check
            outcome.status = ALREADY_SWITCHED
            return
        entry = instance.entry
        config = load_config(entry.config_dir, entry.workspace_path, self.env)
        if config.lockdown:  # CONF-3: its backend comes from the service, not from a file
            outcome.status = LOCKED
            line = switch_line(config, SWITCH_BACKEND, entry.config_dir)
            outcome.error = f"locked: the platform switches it; {line}"
            return
        if not (config.mcp_gateway_url or self.gateway):
            raise UserError(
                f"{entry.config_dir}: no mcp_gateway_url, and no --gateway given; expected the "
                "gateway the instance reaches Loom through"
            )
        given = None if config.mcp_gateway_url else self.gateway
        outcome.phases["config"] = {"written": write_switch(entry.config_dir, gateway_url=given)}
        config = load_config(entry.config_dir, entry.workspace_path, self.env)
        if config.memory_backend != SWITCH_BACKEND:
            where = config.source_of("memory.backend") or "the configuration"
            raise UserError(
                f"{where}: memory.backend is still {config.memory_backend!r} after the switch "
                "was written; expected config.local.yaml to decide it"
            )
        self._noted(journal, "config")
        if "workspace" not in journal.done:
            await self._workspace(instance, outcome)
            if outcome.status == FAILED:
                return
            if outcome.status != CONFLICT_LEFT:  # a conflict is judged again next run
                self._noted(journal, "workspace")
        await self._memory(instance, config, journal, looms, outcome)

    def _noted(self, journal: Journal, phase: str) -> None:
        if journal.note(phase):
            self.steps()

    async def _workspace(self, instance: SwitchEntry, outcome: InstanceOutcome) -> None:
        entry = replace(instance.entry, memory_backend=SWITCH_BACKEND)
        loop = asyncio.get_running_loop()
        done = await loop.run_in_executor(self._threads, self._fleet.one, entry)
        outcome.phases["workspace"] = {
            "status": done.status,
            "files": [
                {"path": f.path, "action": f.action} for f in done.files if f.action != "keep"
            ],
        }
        if done.status == ERROR:
            outcome.status, outcome.error, outcome.busy = FAILED, done.error, done.busy
        elif done.status == CONFLICT:
            outcome.status = CONFLICT_LEFT

    async def _memory(
        self,
        instance: SwitchEntry,
        config: Any,
        journal: Journal,
        looms: SharedLoom,
        outcome: InstanceOutcome,
    ) -> None:
        from provisioner.runtime.face import StateStore

        memu = instance.memu_db or _memu_db_of(config, instance.entry.config_dir)
        nerve = instance.nerve_db
        if not memu.is_file():
            outcome.lacked.append("memu_db")
        if nerve is None or not nerve.is_file():
            outcome.lacked.append("nerve_db")
        todo = [
            phase
            for phase, lacking in (("migrate", "memu_db"), ("sweep", "nerve_db"))
            if phase not in journal.done and lacking not in outcome.lacked
        ]
        if todo:
            instance.state.parent.mkdir(parents=True, exist_ok=True)
            memory = await looms.memory_for(config)
            with faults_named(instance.state), StateStore(instance.state) as state:
                assert self.budget is not None
                loom = FleetLoom(memory, self.budget, steps=self.steps)
                if "migrate" in todo:
                    await self._migrate(memu, loom, state, outcome)
                    if outcome.status in (FAILED, INCOMPLETE):
                        return
                    self._noted(journal, "migrate")
                if "sweep" in todo:
                    assert nerve is not None
                    await self._sweep(nerve, loom, memory, state, config, outcome)
                    if outcome.status in (FAILED, INCOMPLETE):
                        return
        for phase in ("migrate", "sweep"):  # done now, or lacking what they work on
            self._noted(journal, phase)

    async def _migrate(
        self, memu: Path, loom: FleetLoom, state: Any, outcome: InstanceOutcome
    ) -> None:
        from provisioner.migration.memu_store import MemuStore
        from provisioner.migration.migrate import Migration

        with MemuStore(memu) as store:
            report = await Migration(loom, store, state, clock=self.clock).run()
        outcome.phases["migrate"] = {
            "stopped": report.stopped,
            "items": report.items_total,
            "sent": report.sent,
            "already_done": report.already_done,
            "verdicts": dict(report.verdicts),
            "left": report.left,
        }
        if report.stopped in UNREACHED or report.stopped == "already_running":
            outcome.status, outcome.busy = FAILED, True
            outcome.error = (
                f"migrate {report.stopped}: memory could not be reached; try again later"
            )
        elif report.stopped != "done" or report.left:
            outcome.status = INCOMPLETE

    async def _sweep(
        self,
        nerve: Path,
        loom: FleetLoom,
        memory: Any,
        state: Any,
        config: Any,
        outcome: InstanceOutcome,
    ) -> None:
        from provisioner.runtime.face import (
            NerveDatabaseError,
            NerveTranscripts,
            Sweeper,
            extraction_mode,
            sweep_source,
        )

        try:
            source = NerveTranscripts(nerve)
        except NerveDatabaseError as error:
            raise UserError(str(error)) from None
        counts: dict[str, Any] = {
            "rounds": 0,
            "sessions": 0,
            "batches": 0,
            "messages_taken": 0,
            "skipped": 0,
        }
        with source:
            view = sweep_source(source, state, self.clock)  # MIG-2: from memU's watermark
            mode = extraction_mode(config.loom.defer_extraction)
            sweeper = Sweeper(
                loom, view, state, clock=self.clock, mode=mode, concurrency=memory.sweep_concurrency
            )
            for _ in range(SWEEP_ROUNDS):
                report = await sweeper.run_once()
                counts["rounds"] += 1
                counts["sessions"] = max(counts["sessions"], report.sessions_seen)
                counts["batches"] += report.batches_sent
                counts["messages_taken"] += report.messages_taken
                counts["skipped"] += report.messages_skipped
                if report.went_through or report.stopped != "done":
                    break
        counts["stopped"] = report.stopped
        outcome.phases["sweep"] = counts
        if report.stopped in UNREACHED or report.stopped == "already_running":
            outcome.status, outcome.busy = FAILED, True
            outcome.error = f"sweep {report.stopped}: {report.reason or 'try again later'}"
        elif report.fault_kind is not None:
            outcome.status, outcome.error = FAILED, report.reason
            outcome.busy = report.fault_kind in ("busy", "full")
        elif not report.went_through:
            outcome.status = INCOMPLETE


def _memu_db_of(config: Any, config_dir: Path) -> Path:
    """memU's store as ``memory migrate`` finds it without ``--memu-db``: Nerve's
    ``memory.sqlite_dsn``, else ``<config_dir>/memu.sqlite``."""
    memory = config.data.get("memory")
    dsn = memory.get("sqlite_dsn") if isinstance(memory, dict) else None
    if isinstance(dsn, str) and dsn.strip().startswith(SQLITE_DSN_PREFIX):
        return Path(dsn.strip().removeprefix(SQLITE_DSN_PREFIX)).expanduser()
    return config_dir / MEMU_DB_FILE


def _held(error: ProvisionerError) -> bool:
    """Whether ``error`` says the instance is busy — held by another process, or its state or
    memory not usable now — so the same run works later (exit 75, REL-15); a full disk, an
    input, a template or a contract is for someone to look at first."""
    if isinstance(error, FileFault):
        return error.kind == "busy"
    return error.exit_status == EXIT_TRY_LATER
