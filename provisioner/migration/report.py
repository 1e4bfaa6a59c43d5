"""What a migration run, or a dry run, did: counts, Loom's verdicts, items by id (MIG-1).

A report names items by their memU id only, and rows without a usable id by count: never an
item's text, a category name or anything else memU holds. ``as_dict`` is what ``--json``
prints; ``lines`` what a person reads, each list of ids cut at ``IDS_SHOWN``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from provisioner.base.counts import counted
from provisioner.runtime.face import CAUSE_OF_KIND, WRITE_VERDICTS

IDS_SHOWN = 20  # our choice: ids a text report lists per kind; --json lists them all

# Why a run stopped, beside the sweep's reasons for ending (breaker_open, no_answer,
# unreachable, unavailable: memory could not be reached).
STOPPED_DONE = "done"  # every item was offered
STOPPED_BUSY = "already_running"  # another migration of this state file is running
STOPPED_NOT_NOW = "not_now"  # "not now" item after item, or for longer than a run waits (REL-16)
STOPPED_CONTRACT = "contract_broken"  # an answer out of contract: a bug to report
STOPPED_LOOM_FAILING = "loom_failing"  # item after item failed, the last uncoded (REL-16)
STOPPED_SOURCE = "source_failed"  # memU's store could not be read on
STOPPED_INTERRUPTED = "interrupted"  # the process was stopped mid-run (what the ledger keeps)
STOPPED_STATE = "state_failed"  # the state file could not be written (busy, full, …: REL-4)

WHY = {
    STOPPED_BUSY: "another migration of this state file is running; this one sent nothing",
    STOPPED_NOT_NOW: "Loom or the gateway kept answering not now (item after item, or for "
    "longer than a run waits); run again later",
    STOPPED_CONTRACT: "an answer broke Loom's contract; report it, nothing more was sent",
    STOPPED_LOOM_FAILING: "Loom failed item after item, the last with its internal error; run "
    "again later",
    STOPPED_SOURCE: "memU's store could not be read on",
    STOPPED_STATE: "the state file could not be written",
    STOPPED_INTERRUPTED: "stopped by a signal (SIGINT or SIGTERM); every answer Loom gave is "
    "kept, run again to go on",
    "breaker_open": "the gateway failed too often; memory could not be reached",
    "no_answer": "the gateway did not answer in time; memory could not be reached",
    "unreachable": "the gateway could not be reached",
    "unavailable": "memory is unavailable (no gateway URL, no loom in the catalog, or refused)",
}


@dataclass
class MigrationReport:
    """One run of ``nerve memory migrate`` (also what ``--json`` prints, with exit_status).

    ``state`` is the state file keeping the ledger. ``verdicts`` counts Loom's answers this
    run; ``rejected``, ``conflicts``, ``skipped``
    (never sent again), ``failing`` (Loom's uncoded error, sent again next run) and
    ``waiting`` (an error about the item alone, sent again next run) name items by id.
    ``ledger`` counts the ledger's items by status after the run, and ``left`` the items of
    the store not yet final in it. ``unusable_rows`` counts the rows whose id cannot be a key:
    none, not a printable word, or (``repeated_ids``, named) held by more than one row, so
    that ``memu-<id>`` would name two memories (REL-8). ``left_out`` counts, per field, the
    items written without it because the live ``loom_memory_set`` does not declare it (an
    older Loom: no ``kind``, ``tags`` or dates; REL-8). ``sent`` counts the items sent this
    run, each once; ``retries`` counts the sends made again within the run after a "not now"
    (so the calls that left are ``sent + retries``), and ``waited_s`` the seconds waited
    before them. ``deferred`` counts the items still "not now" after their tries, deferred to
    the run's end and sent again there (REL-16), ``deferred_taken`` those of them Loom then
    answered, and ``not_now`` names those still "not now" when the run ended (sent again next
    run).
    """

    source: str
    state: str = ""
    stopped: str = STOPPED_DONE
    error_kind: str | None = None
    items_total: int = 0
    items_seen: int = 0
    already_done: int = 0
    sent: int = 0
    verdicts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(WRITE_VERDICTS, 0))
    rejected: list[dict[str, str | None]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    failing: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[dict[str, str]] = field(default_factory=list)
    unusable_rows: int = 0
    repeated_ids: list[str] = field(default_factory=list)
    fields_dropped: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    waited_s: float = 0.0
    deferred: int = 0
    deferred_taken: int = 0
    not_now: list[dict[str, str]] = field(default_factory=list)
    ledger: dict[str, int] = field(default_factory=dict)
    left: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The report for a person: one summary line, then the items by id."""
        final = sum(count for status, count in self.ledger.items() if status != "failing")
        verdicts = ", ".join(f"{name} {self.verdicts[name]}" for name in WRITE_VERDICTS)
        lines = [
            f"migrate {self.stopped}: {final} of {self.items_total} memU items done, "
            f"{self.left} left; this run sent {self.sent} ({verdicts}), "
            f"{self.already_done} already done"
        ]
        if self.stopped in WHY:
            lines.append(f"  stopped: {self._why()}")
        rejected = [
            f"{r['id']} ({r['reason']})" if r["reason"] else str(r["id"]) for r in self.rejected
        ]
        lines += _listed("rejected", rejected)
        lines += _listed("conflict", self.conflicts)
        lines += _listed("skipped", [f"{s['id']} ({s['reason']})" for s in self.skipped])
        lines += _listed(
            "failing",
            [
                f"{f['id']} (Loom's internal error, {f['failures']} runs in a row)"
                for f in self.failing
            ],
        )
        lines += _listed("waiting", [f"{w['id']} ({w['kind']})" for w in self.waiting])
        lines += _listed("not now", [f"{n['id']} ({n['kind']})" for n in self.not_now])
        if self.left_out:
            fields = ", ".join(f"{name} {count}" for name, count in sorted(self.left_out.items()))
            lines.append(
                f"  written without what this Loom's loom_memory_set does not take: {fields}"
            )
        if self.retries:
            lines.append(
                f"  {counted(self.retries, 'write')} sent again after Loom or the gateway "
                f"answered not now ({self.waited_s:.0f} s waited)"
            )
        if self.deferred:
            lines.append(
                f"  {counted(self.deferred, 'item')} still not now after "
                f"{'its' if self.deferred == 1 else 'their'} tries, sent again at the run's "
                f"end: {self.deferred_taken} went then"
            )
        if self.unusable_rows:
            lines.append(
                f"  {counted(self.unusable_rows, 'row')} without an id that can be a key; "
                "not written"
            )
        lines += _listed("repeated id, each on more than one row", self.repeated_ids)
        if self.fields_dropped:
            lines.append(
                f"  {counted(self.fields_dropped, 'item')} went without a type, category or "
                "date memU "
                "held in a form Loom cannot keep"
            )
        return lines

    def _why(self) -> str:
        """Why the run stopped; a file fault names the file and the cause (REL-4)."""
        cause = CAUSE_OF_KIND.get(self.error_kind or "")
        if cause is not None and self.stopped == STOPPED_STATE:
            return f"the state file {self.state} could not be written: {cause}"
        if cause is not None and self.stopped == STOPPED_SOURCE:
            return f"memU's store {self.source} could not be read on: {cause}"
        kind = f" ({self.error_kind})" if self.error_kind else ""
        return f"{WHY[self.stopped]}{kind}"


@dataclass
class DryRunReport:
    """What a run would do now, found without sending or writing anything."""

    source: str
    items_total: int = 0
    would_write: int = 0
    bytes: int = 0
    already_done: int = 0
    unusable: dict[str, int] = field(default_factory=dict)
    unusable_rows: int = 0
    repeated_rows: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    with_tags: int = 0
    fields_dropped: int = 0
    dry_run: bool = True

    def count_kind(self, kind: str | None) -> None:
        name = kind or "none"
        self.kinds[name] = self.kinds.get(name, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        cannot = sum(self.unusable.values()) + self.unusable_rows
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.unusable.items()))
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(self.kinds.items()))
        lines = [
            f"migrate dry run: {self.items_total} memU items in {self.source}; "
            f"{self.would_write} would be written ({self.bytes} bytes of text), "
            f"{self.already_done} already done, {cannot} cannot go; nothing was sent or written",
            f"  by type: {kinds or 'none'}; {self.with_tags} with categories",
        ]
        if cannot:
            rows = f", no usable id {self.unusable_rows}" if self.unusable_rows else ""
            if self.repeated_rows:
                rows += f" ({self.repeated_rows} of them with an id another row holds too)"
            lines.append(f"  cannot go: {reasons or 'none'}{rows}")
        if self.fields_dropped:
            lines.append(f"  {self.fields_dropped} would go without a type, category or date")
        return lines


def _listed(label: str, entries: list[str]) -> list[str]:
    if not entries:
        return []
    shown = ", ".join(entries[:IDS_SHOWN])
    more = len(entries) - IDS_SHOWN
    if more > 0:
        shown += f", and {more} more (--json lists them all)"
    return [f"  {label} ({len(entries)}): {shown}"]
