"""What ``fleet switch`` prints, and its exit status (FLEET-8).

``--json`` prints ``{"schema": 1, "instances": [...], "summary": {...}}``: each instance by the
workspace path the inventory gives, its status, what each phase did (``config``: the keys
written; ``workspace``: its status and files' actions; ``migrate``: memU's items, sent, Loom's
verdicts, left; ``sweep``: sessions, batches, messages taken), what it lacked (``memu_db``,
``nerve_db``) and, for an ``error`` or ``locked`` instance, its one line. The summary counts
instances per status and adds up the memories and messages. The text shows one line per
instance and the counts last.

Exit statuses, as ``fleet update``'s (FLEET-1), highest concern first: 2 when an instance
failed, 75 when one was busy or memory could not be reached (the same run works later), 1 when
a conflict, a locked instance or work for the next run is left, else 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from provisioner.base.counts import counted
from provisioner.fleet.report import EXIT_BUSY, EXIT_CHANGES, EXIT_ERROR, EXIT_UP_TO_DATE
from provisioner.fleet.switch import FAILED, STATUSES, InstanceOutcome

JSON_SCHEMA = 1  # FLEET-8
CALM = ("switched", "already_switched")


def summary(outcomes: Sequence[InstanceOutcome]) -> dict[str, int]:
    """Instances per status, then the fleet's totals of memories and messages."""
    counts = Counter(outcome.status for outcome in outcomes)
    totals = dict.fromkeys(STATUSES, 0) | {s: counts.get(s, 0) for s in STATUSES}
    memories = Counter[str]()
    messages = Counter[str]()
    for outcome in outcomes:
        migrate = outcome.phases.get("migrate") or {}
        memories["memories_sent"] += migrate.get("sent", 0)
        for verdict, number in (migrate.get("verdicts") or {}).items():
            memories[f"memories_{verdict}"] += number
        sweep = outcome.phases.get("sweep") or {}
        messages["batches_sent"] += sweep.get("batches", 0)
        messages["messages_taken"] += sweep.get("messages_taken", 0)
    return {**totals, **memories, **messages}


def report_json(outcomes: Sequence[InstanceOutcome]) -> dict[str, Any]:
    """The run as FLEET-8's JSON document."""
    return {
        "schema": JSON_SCHEMA,
        "instances": [outcome.as_dict() for outcome in outcomes],
        "summary": summary(outcomes),
    }


def report_text(outcomes: Sequence[InstanceOutcome]) -> str:
    """One line per instance, and the counts last."""
    lines: list[str] = []
    for outcome in outcomes:
        head = f"{outcome.status:<16} {outcome.instance.name}"
        if outcome.error:
            lines.append(f"{head}: {outcome.error}")
            continue
        parts = []
        migrate = outcome.phases.get("migrate")
        if migrate:
            parts.append(
                f"{migrate['sent']} of {counted(migrate['items'], 'memory', 'memories')} sent"
            )
        sweep = outcome.phases.get("sweep")
        if sweep:
            parts.append(f"{counted(sweep['messages_taken'], 'message')} swept")
        conflicts = [
            file["path"]
            for file in (outcome.phases.get("workspace") or {}).get("files", [])
            if file["action"] == "conflict"
        ]
        if conflicts:
            parts.append(f"resolve {', '.join(conflicts)}")
        if outcome.lacked:
            parts.append(f"no {' or '.join(outcome.lacked)}")
        lines.append(head + (f" ({'; '.join(parts)})" if parts else ""))
    totals = summary(outcomes)
    shown = ", ".join(f"{totals[s]} {s.replace('_', ' ')}" for s in STATUSES if totals[s])
    lines.append(
        f"{counted(len(outcomes), 'instance')}: {shown}; {totals.get('memories_sent', 0)} "
        f"memories sent, {totals.get('messages_taken', 0)} messages swept"
    )
    return "\n".join(lines) + "\n"


def exit_status(outcomes: Sequence[InstanceOutcome]) -> int:
    """FLEET-1's exit statuses for the switch (see the module docstring)."""
    if any(o.status == FAILED and not o.busy for o in outcomes):
        return EXIT_ERROR
    if any(o.busy for o in outcomes):
        return EXIT_BUSY
    if any(o.status not in CALM for o in outcomes):
        return EXIT_CHANGES
    return EXIT_UP_TO_DATE
