"""The migration: every memU item into Loom once, resumable from the ledger (MIG-1).

``await migrate_instance(memu_path, state, loom)`` migrates one instance: memU's store at
``memu_path`` into the Loom behind ``loom`` (anything with ``LoomMemory.set_memory``), keeping
the ledger in the runtime's state file ``state``, and returns the run's ``MigrationReport``.
``Migration(writer, store, state)`` is the run itself, over a store already open. A run walks
the store page by page; an item the ledger holds as final is passed over, every other one goes
as one ``loom_memory_set`` write under the key ``memu-<id>``, and Loom's answer is in the
ledger before the next item goes. So a second run writes nothing twice, and a run after a crash
goes on where the first stopped: at worst the one item in flight goes again, and Loom, finding
its key, answers ``duplicate``.

A failed write is answered as the sweep answers a failed extraction (``reaction_to``):

* memory not reachable (no gateway, breaker open, no answer, refused): the run ends;
* Loom's uncoded internal error: counts against the item, which goes again next run; three
  runs in a row skip it, with an audit row, once the same run shows Loom working (another
  item went through, or it was the only item failing): a Loom failing everything skips
  nothing;
* "not now" (a coded fault, -32002 or 429/502/503, the gateway's call limit, or the
  connection reset or closed before the whole answer came): the item is sent again within the
  run, after a jittered backoff that honours the gateway's ``Retry-After`` (``NOT_NOW_TRIES``
  tries at most, each wait at most ``NOT_NOW_WAIT_MAX_S``) (REL-8). An item still "not now"
  after its tries is deferred to the run's end and sent again there, with as many tries, in
  rounds while a round moves at least one of them (REL-16). The keyed write makes every
  resend safe: a write Loom took before its answer was lost is answered ``duplicate``;
* an answer out of contract: the run stops (a bug to report);
* anything else about the one item (a body too large for the gateway, a tool that refused):
  the item waits for the next run, and the run goes on.

The run stops early only when Loom fails broadly (REL-16), judged two ways:
``BROAD_FAILURE_STREAK`` items in a row that Loom failed (its uncoded error, or "not now"
through every try; any item Loom answers breaks the row), or a ``Retry-After`` longer than
``NOT_NOW_WAIT_MAX_S``, the gateway's own word that nothing goes for a while (not waited
out). A round of deferred items that moves none of them also ends the run: what is left goes
next run.

Each write carries the item's kind, tags and dates only where the live ``loom_memory_set``
declares them (its ``inputSchema``, read once per run with MCP ``tools/list``): an older Loom
takes the text under its key, and the report counts per field what was left out (REL-8).

``dry_run`` counts what a run would do, sending and writing nothing. Reports and log lines name
items by id, never by text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from provisioner.migration.ledger import FAILURES_TO_SKIP, Ledger, migration_lock
from provisioner.migration.memu_store import MemuItem, MemuReadError, MemuStore, Row, UnusableRow
from provisioner.migration.report import (
    STOPPED_BUSY,
    STOPPED_CONTRACT,
    STOPPED_DONE,
    STOPPED_INTERRUPTED,
    STOPPED_LOOM_FAILING,
    STOPPED_NOT_NOW,
    STOPPED_SOURCE,
    STOPPED_STATE,
    DryRunReport,
    MigrationReport,
)
from provisioner.runtime.face import (
    SWEEP_ERRORS,
    WRITE_DEADLINE_S,
    BrokenAnswer,
    CatalogError,
    CircuitOpen,
    CodedFault,
    ContractBroken,
    GatewayCallTimeout,
    LedgerEntry,
    MayPass,
    MemoryBackendUnavailable,
    MemoryWrite,
    NoAnswer,
    NotNow,
    Sleep,
    StateStore,
    WriteVerdict,
    classify_file_error,
    error_kind,
    reaction_to,
)

WRITE_GUARD_S = 10.0  # our choice: past the write's deadline and this, the run stops waiting
SKIP_REASON = f"Loom's internal error {FAILURES_TO_SKIP} runs in a row"
# Failures raised before anything left this process: not counted as sent.
NOTHING_SENT = (MemoryBackendUnavailable, CircuitOpen, CatalogError, ValueError)
# REL-8: the "not now" answers an item is sent again for, within the run. The keyed write
# makes a second send safe: Loom answers ``duplicate`` if the first one was taken after all.
# Not the client's own open breaker nor a closed client: those end the run at once.
RETRIED_NOT_NOW = (MayPass, CodedFault, GatewayCallTimeout)
# REL-16: a connection reset or closed before the whole answer came, which the gateway client
# reports as a ``BrokenAnswer`` caused by one of these. Whether Loom took the write is
# unknown, and the keyed write makes sending it again safe: "not now", not a broken contract.
CONNECTION_LOST = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
NOT_NOW_TRIES = 5  # REL-8 (our choice): one send and four more while "not now" persists
NOT_NOW_BACKOFF_FIRST_S = 1.0  # REL-8 (our choice): then 2, 4, 8 s, each plus jitter
NOT_NOW_JITTER_S = 1.0  # REL-8 (our choice): up to this much added to each backoff
NOT_NOW_WAIT_MAX_S = 30.0  # REL-8 (our choice): the longest one wait, Retry-After included
# So an item's tries wait at most 4 x 30 s = 120 s in all, and at most 1+2+4+8 s + 4 x 1 s =
# 19 s when the gateway names no Retry-After; a Retry-After past 30 s stops the run instead.
# REL-16 (our choice): so many items in a row that Loom failed — its uncoded error, or "not
# now" through every try — mean Loom fails broadly, and the run ends. At three calls in ten
# turned away an item is still "not now" after five tries once in 412 (0.3 ** 5), five items
# in a row about once in 10 ** 13; a gateway turning nearly everything away ends the run
# within a few items.
BROAD_FAILURE_STREAK = 5


log = logging.getLogger("provisioner.migration.migrate")


class Writer(Protocol):
    """What the migration needs of the Loom backend: ``LoomMemory.set_memory``."""

    async def set_memory(self, write: MemoryWrite) -> WriteVerdict: ...


@dataclass(frozen=True)
class MigrationProgress:
    """Where a run is, after each page (for a progress line on a terminal)."""

    items_seen: int
    items_total: int
    sent: int


ProgressCallback = Callable[[MigrationProgress], None]
InterruptCallback = Callable[[MigrationReport], None]


async def migrate_instance(
    memu_path: Path,
    state: StateStore,
    loom: Writer,
    *,
    clock: Callable[[], float] | None = None,
    sleep: Sleep = asyncio.sleep,
    progress: ProgressCallback | None = None,
    interrupted: InterruptCallback | None = None,
) -> MigrationReport:
    """Migrate one instance: memU's store at ``memu_path`` into the Loom behind ``loom``,
    keeping the ledger in ``state``; the run's report (its counts, Loom's verdicts, the items
    by id, why it stopped).

    ``loom`` is anything with ``LoomMemory.set_memory``: a caller running many instances may
    hand each one a writer that draws on a budget they share. ``clock`` (wall seconds) dates
    the ledger's rows and ``sleep`` waits between tries; ``progress`` is told after each page.

    Never raises for Loom, the gateway, memU's rows or the state file (``Migration.run``).
    ``MemuStoreError`` (bad input) or ``FileFault`` (REL-4) when memU's store cannot be opened.
    Cancelled (SIGINT, SIGTERM: REL-9), it calls ``interrupted`` with the report of the run
    so far (``stopped == "interrupted"``) before the cancellation goes on.
    """
    with MemuStore(memu_path) as store:
        migration = Migration(loom, store, state, clock=clock, sleep=sleep)
        try:
            return await migration.run(progress=progress)
        except asyncio.CancelledError:
            if interrupted is not None and migration.report is not None:
                interrupted(migration.report)
            raise


class Migration:
    """Migrates ``store`` into Loom through ``writer``, keeping the ledger in ``state``.

    ``clock`` gives the wall time (seconds since the epoch) of ledger and audit rows; ``sleep``
    waits between the tries of an item answered "not now" (REL-8).
    """

    def __init__(
        self,
        writer: Writer,
        store: MemuStore,
        state: StateStore,
        *,
        clock: Callable[[], float] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._writer = writer
        self._store = store
        self._state = state
        self._sleep = sleep
        self._backoff = wait_exponential_jitter(
            initial=NOT_NOW_BACKOFF_FIRST_S, max=NOT_NOW_WAIT_MAX_S, jitter=NOT_NOW_JITTER_S
        )
        self._ledger = Ledger(state, clock=clock or time.time)
        self._streak = 0  # REL-16: items in a row Loom failed
        self._due_skips: list[LedgerEntry] = []
        # REL-16: the ids of items still "not now" after their tries, each with the kind of
        # its last failure; only ids are held, the items are read again at the run's end.
        self._deferred: dict[str, str] = {}
        self.report: MigrationReport | None = None

    async def run(self, progress: ProgressCallback | None = None) -> MigrationReport:
        """One run over the whole store; never raises for Loom, the gateway, memU's rows or a
        state file that cannot be written (busy past its wait, a full disk, …: the run then
        stops with ``state_failed`` and the fault's kind, REL-4; an answer not yet noted is
        sent again next run).

        Returns at once, with ``stopped == "already_running"``, while another migration of
        the same state file runs. ``progress`` is called after each page, and after each
        round of deferred items. A run cancelled (SIGINT or SIGTERM, REL-9) or killed by any
        other exception leaves its report, with ``stopped == "interrupted"`` and the ledger's
        counts, in ``self.report``.
        """
        report = self.report = MigrationReport(
            source=str(self._store.path), state=str(self._state.path)
        )
        with migration_lock(self._state.path) as held:
            if not held:
                report.stopped = STOPPED_BUSY
                return report
            try:
                report.items_total = self._store.count()
            except MemuReadError as error:
                report.stopped, report.error_kind = STOPPED_SOURCE, error.fault_kind or error.kind
                return report
            try:
                await self._run(report, progress)
            except sqlite3.Error as error:
                kind = classify_file_error(error) or type(error).__name__  # REL-4: full, busy, …
                log.warning("the state file could not be written: %s", kind)
                report.stopped, report.error_kind = STOPPED_STATE, kind
            finally:
                self._count_what_is_left(report)
        return report

    def _count_what_is_left(self, report: MigrationReport) -> None:
        """The ledger's counts after the run, the store's items not yet final in it, and the
        deferred items still "not now" when the run ended, by id."""
        with contextlib.suppress(sqlite3.Error):
            report.ledger = self._ledger.totals()
        final = sum(count for status, count in report.ledger.items() if status != "failing")
        report.left = max(0, report.items_total - final - report.unusable_rows)
        report.not_now = [{"id": item_id, "kind": kind} for item_id, kind in self._deferred.items()]

    async def _run(self, report: MigrationReport, progress: ProgressCallback | None) -> None:
        self._ledger.start_run(report.source, report.items_total)
        report.stopped = STOPPED_INTERRUPTED  # until the walk returns
        try:
            report.stopped = await self._walk(report, progress)
            if report.stopped == STOPPED_DONE and self._loom_took_some(report):
                self._skip_due(report)
        finally:
            with contextlib.suppress(sqlite3.Error):
                self._ledger.finish_run(report.stopped, rows_without_id=report.unusable_rows)

    async def _walk(self, report: MigrationReport, progress: ProgressCallback | None) -> str:
        """Every page of the store, then the deferred items' rounds; why the run stopped."""
        try:
            for page in self._store.pages():
                stopped = await self._page(page, report)
                if stopped is not None:
                    return stopped
                _tell(progress, report)
            return await self._deferred_rounds(report, progress)
        except MemuReadError as error:
            report.error_kind = error.fault_kind or error.kind
            log.warning("memU's store could not be read on: %s", report.error_kind)
            return STOPPED_SOURCE

    async def _deferred_rounds(
        self, report: MigrationReport, progress: ProgressCallback | None
    ) -> str:
        """Send the deferred items again, each with its tries, round after round while a
        round moves at least one of them (REL-16); a round that moves none ends the run,
        leaving them for the next. Each round reads the store again for them, so a run holds
        their ids, never their texts; an item gone from the store meanwhile is dropped."""
        while self._deferred:
            waiting, self._deferred = self._deferred, {}
            answered = sum(report.verdicts.values())
            for item in self._items_among(waiting):
                del waiting[item.item_id]
                stopped = await self._write(item, report, again=True)
                if stopped is not None:
                    self._deferred = {**waiting, **self._deferred}
                    return stopped
            _tell(progress, report)
            if self._deferred and sum(report.verdicts.values()) == answered:
                report.error_kind = next(reversed(self._deferred.values()))
                return STOPPED_NOT_NOW
        return STOPPED_DONE

    def _items_among(self, ids: dict[str, str]) -> Iterator[MemuItem]:
        """The store's items whose ids are in ``ids``, read page by page in the store's order;
        ``MemuReadError`` when a page fails."""
        for page in self._store.pages():
            for row in page:
                if isinstance(row, MemuItem) and row.item_id in ids:
                    yield row

    async def _page(self, page: list[Row], report: MigrationReport) -> str | None:
        ids = [row.item_id for row in page if row.item_id is not None]
        known = self._ledger.entries(ids)
        for row in page:
            report.items_seen += 1
            entry = known.get(row.item_id) if row.item_id is not None else None
            if entry is not None and entry.final:
                report.already_done += 1
            elif isinstance(row, UnusableRow):
                self._unusable(row, report)
            else:
                report.fields_dropped += bool(row.dropped)
                stopped = await self._write(row, report)
                if stopped is not None:
                    return stopped
        return None

    def _unusable(self, row: UnusableRow, report: MigrationReport) -> None:
        """A row that cannot go: skipped for good when it has an id, else only counted (and
        a repeated id named once)."""
        if row.item_id is None:
            report.unusable_rows += 1
            if row.repeated is not None and row.repeated not in report.repeated_ids:
                report.repeated_ids.append(row.repeated)
            return
        self._ledger.record_skip(row.item_id, row.reason)
        report.skipped.append({"id": row.item_id, "reason": row.reason})

    async def _write(
        self, item: MemuItem, report: MigrationReport, *, again: bool = False
    ) -> str | None:
        """Send one item and keep Loom's answer; the reason the run stops, or None.

        ``again``: a deferred item sent at the run's end, whose sends count as sent again
        (``retries``), so that ``sent`` counts each item once (REL-16).
        """
        try:
            verdict = await self._send_until_taken(item.write, report)
        except SWEEP_ERRORS as error:
            _count_send(report, again=again, left=not isinstance(error, NOTHING_SENT))
            return self._failed(item, error, report, again=again)
        _count_send(report, again=again, left=True)
        self._ledger.record_verdict(item.item_id, verdict)
        report.verdicts[verdict.verdict] += 1
        report.deferred_taken += again
        for name in verdict.left_out:  # REL-8: what the live Loom does not declare
            report.left_out[name] = report.left_out.get(name, 0) + 1
        if verdict.verdict == "rejected":
            report.rejected.append({"id": item.item_id, "reason": verdict.reason})
        elif verdict.verdict == "conflict":
            report.conflicts.append(item.item_id)
        self._streak = 0
        self._skip_due(report)
        return None

    async def _send_until_taken(self, write: MemoryWrite, report: MigrationReport) -> WriteVerdict:
        """Send ``write``, and again after a wait while the answer is "not now" (REL-8); the
        last failure is raised as it came once the tries are spent or a wait would be too long.
        """

        def note_retry(attempt: RetryCallState) -> None:
            report.retries += 1
            report.waited_s += attempt.next_action.sleep if attempt.next_action else 0.0

        retrying = AsyncRetrying(
            stop=stop_after_attempt(NOT_NOW_TRIES),
            wait=self._wait_before_retry,
            retry=retry_if_exception(_worth_waiting_for),
            sleep=self._sleep,
            before_sleep=note_retry,
            reraise=True,
        )
        return await retrying(self._send, write)

    def _wait_before_retry(self, attempt: RetryCallState) -> float:
        """The backoff, or the gateway's ``Retry-After`` when that is longer."""
        error = attempt.outcome.exception() if attempt.outcome is not None else None
        said = getattr(error, "retry_after_s", None) or 0.0
        return min(max(self._backoff(attempt), said), NOT_NOW_WAIT_MAX_S)

    async def _send(self, write: MemoryWrite) -> WriteVerdict:
        limit_s = WRITE_DEADLINE_S + WRITE_GUARD_S
        try:
            async with asyncio.timeout(limit_s):
                return await self._writer.set_memory(write)
        except TimeoutError:
            raise NoAnswer(f"no answer within {limit_s} s", deadline_s=limit_s) from None

    def _failed(
        self, item: MemuItem, error: Exception, report: MigrationReport, *, again: bool
    ) -> str | None:
        """Answer one item's failed write (``again``: at the run's end); the reason the run
        stops, or None."""
        kind = _kind_of(error)
        log.warning("memu item %s: the write failed: %s", item.item_id, kind)
        reaction = reaction_to(error)
        if reaction.ends_sweep is not None:
            report.error_kind = kind
            return reaction.ends_sweep
        if _is_not_now(error):
            if not _worth_waiting_for(error):  # a Retry-After past the longest wait
                report.error_kind = kind
                return STOPPED_NOT_NOW
            self._deferred[item.item_id] = kind
            report.deferred += not again  # each item counted once, however many rounds
            return self._failed_by_loom(kind, STOPPED_NOT_NOW, report)
        if reaction.counts_against_batch:
            entry = self._ledger.record_failure(item.item_id, kind)
            report.failing.append({"id": item.item_id, "failures": entry.failures})
            if entry.failures >= FAILURES_TO_SKIP:
                self._due_skips.append(entry)
            return self._failed_by_loom(kind, STOPPED_LOOM_FAILING, report)
        if isinstance(error, NotNow):
            report.error_kind = kind
            return STOPPED_NOT_NOW
        if isinstance(error, ContractBroken):
            report.error_kind = kind
            return STOPPED_CONTRACT
        report.waiting.append({"id": item.item_id, "kind": kind})
        return None

    def _failed_by_loom(self, kind: str, stopped: str, report: MigrationReport) -> str | None:
        """One more item in a row that Loom failed; ``stopped`` once the row says Loom fails
        broadly (REL-16), else None and the run goes on."""
        self._streak += 1
        if self._streak < BROAD_FAILURE_STREAK:
            return None
        report.error_kind = kind
        return stopped

    @staticmethod
    def _loom_took_some(report: MigrationReport) -> bool:
        """Whether this run shows Loom working: a write it answered, or only one item failing
        (the last one left, say), which is then about that item."""
        return sum(report.verdicts.values()) > 0 or len(report.failing) == 1

    def _skip_due(self, report: MigrationReport) -> None:
        """Loom took an item: those it kept failing are about themselves, so they go (MIG-1)."""
        for entry in self._due_skips:
            self._ledger.record_skip(entry.item_id, SKIP_REASON, failures=entry.failures)
            report.skipped.append({"id": entry.item_id, "reason": SKIP_REASON})
            report.failing = [f for f in report.failing if f["id"] != entry.item_id]
        self._due_skips.clear()


def _count_send(report: MigrationReport, *, again: bool, left: bool) -> None:
    """Count one item's send that ``left`` this process: as sent, or, for a deferred item
    sent at the run's end, as sent again."""
    if again:
        report.retries += left
    else:
        report.sent += left


def _tell(progress: ProgressCallback | None, report: MigrationReport) -> None:
    if progress is not None:
        progress(MigrationProgress(report.items_seen, report.items_total, report.sent))


def _connection_lost(error: BaseException) -> bool:
    """Whether ``error`` is the connection reset or closed before the whole answer came
    (REL-16), not an answer out of contract."""
    return isinstance(error, BrokenAnswer) and isinstance(error.__cause__, CONNECTION_LOST)


def _is_not_now(error: BaseException) -> bool:
    """A "not now" an item is sent again for: within the run, then at its end (REL-8, REL-16)."""
    return isinstance(error, RETRIED_NOT_NOW) or _connection_lost(error)


def _worth_waiting_for(error: BaseException) -> bool:
    """A "not now" worth sending the item again for within the run: one that may pass soon,
    whose ``Retry-After`` (if any) is no longer than one wait (REL-8)."""
    if not _is_not_now(error):
        return False
    said = getattr(error, "retry_after_s", None)
    return said is None or said <= NOT_NOW_WAIT_MAX_S


def _kind_of(error: Exception) -> str:
    """``error_kind``, and for a lost connection what the transport met
    (``BrokenAnswer(ReadError)``), so a report tells it from a broken answer."""
    kind = error_kind(error)
    if _connection_lost(error):
        return f"{kind}({type(error.__cause__).__name__})"
    return kind


def dry_run(store: MemuStore, done: set[str]) -> DryRunReport:
    """What a run would send now, given the ids ``done`` the ledger passes over; sends and
    writes nothing. ``MemuReadError`` when memU's store cannot be read to its end."""
    report = DryRunReport(source=str(store.path), items_total=store.count())
    for page in store.pages():
        for row in page:
            if row.item_id is not None and row.item_id in done:
                report.already_done += 1
            elif isinstance(row, UnusableRow):
                if row.item_id is None:
                    report.unusable_rows += 1
                    report.repeated_rows += row.repeated is not None
                else:
                    report.unusable[row.reason] = report.unusable.get(row.reason, 0) + 1
            else:
                report.would_write += 1
                report.bytes += row.size
                report.count_kind(row.write.kind)
                report.with_tags += bool(row.write.tags)
                report.fields_dropped += bool(row.dropped)
    return report
