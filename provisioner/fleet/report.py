"""What a fleet run prints, and its exit status (FLEET-1).

``--json`` prints ``{"schema": 1, "workspaces": [...], "summary": {...}}``: each workspace by
the path the inventory gives, its status and its files' actions; an ``error`` workspace also
carries its one-line ``error``, and one in ``conflict`` its ``resolve`` list: the files a
person must resolve. A workspace in conflict is still brought up to date everywhere else (a
backend switch re-words every file that merges), and each conflicting file is left as the
agent wrote it, so it may still name the tools of the backend it was worded for until
someone resolves it; the report says so. The text shows one line per workspace, each
conflict's diff3-style preview, the files to resolve, and the counts. Exit statuses,
highest concern first: 2 when a workspace failed, 75 when one was busy (another init held
its lock), 1 when one drifts (check) or a conflict is left, else 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from provisioner.counts import counted
from provisioner.fleet.run import CONFLICT, DRIFT, ERROR, STATUSES, UP_TO_DATE, WorkspaceOutcome

JSON_SCHEMA = 1  # FLEET-1
EXIT_UP_TO_DATE = 0  # FLEET-1: every workspace is (check) or ends (update) up to date
EXIT_CHANGES = 1  # FLEET-1: check: drift or conflicts; update: conflicts left
EXIT_ERROR = 2  # FLEET-1: a bad inventory, or a workspace in error
EXIT_BUSY = 75  # FLEET-1: a workspace was busy (EX_TEMPFAIL: the same run works later)
_ACTION_WORDS = {
    "create": "created",
    "reword": "re-worded",
    "merge": "merged",
    "conflict": "in conflict",
    "keep": "kept (edited)",
}
_CHECK_WORDS = {
    "create": "to create",
    "reword": "to re-word",
    "merge": "to merge",
    "conflict": "in conflict",
    "keep": "kept (edited)",
}


def summary(outcomes: Sequence[WorkspaceOutcome]) -> dict[str, int]:
    counts = Counter(outcome.status for outcome in outcomes)
    return {status: counts.get(status, 0) for status in STATUSES}


def to_resolve(outcome: WorkspaceOutcome) -> list[str]:
    """The files of ``outcome`` a person must resolve: those left in conflict, by path."""
    return [f.path for f in outcome.files if f.action == CONFLICT]


def report_json(outcomes: Sequence[WorkspaceOutcome]) -> dict[str, Any]:
    """The run as FLEET-1's JSON document."""
    workspaces: list[dict[str, Any]] = []
    for outcome in outcomes:
        item: dict[str, Any] = {
            "workspace": outcome.entry.workspace,
            "status": outcome.status,
            "files": [{"path": f.path, "action": f.action} for f in outcome.files],
        }
        if outcome.status == ERROR:
            item["error"] = outcome.error
        if outcome.status == CONFLICT:
            item["resolve"] = to_resolve(outcome)
        workspaces.append(item)
    return {"schema": JSON_SCHEMA, "workspaces": workspaces, "summary": summary(outcomes)}


def report_text(outcomes: Sequence[WorkspaceOutcome], *, update: bool) -> str:
    """One line per workspace, conflict previews below it, and the counts last."""
    words = _ACTION_WORDS if update else _CHECK_WORDS
    lines: list[str] = []
    for outcome in outcomes:
        head = f"{outcome.status:<10} {outcome.entry.workspace}"
        if outcome.status == ERROR:
            lines.append(f"{head}: {outcome.error}")
            continue
        counts = Counter(f.action for f in outcome.files)
        shown = [f"{counts[a]} {words[a]}" for a in words if counts[a] and a != "keep"]
        lines.append(f"{head}" + (f" ({', '.join(shown)})" if shown else ""))
        for conflict in (f for f in outcome.files if f.action == CONFLICT):
            lines.append(f"  conflict {conflict.path}: edited where the template changed too")
            lines += [f"    {line}" for line in conflict.preview.splitlines()]
        if outcome.status == CONFLICT:
            lines.append(
                f"  resolve by hand: {', '.join(to_resolve(outcome))} (left as the agent wrote "
                "it, so it may still name tools of the backend it was worded for)"
            )
    totals = summary(outcomes)
    total = counted(len(outcomes), "workspace")
    parts = ", ".join(f"{totals[s]} {s.replace('_', ' ')}" for s in STATUSES if totals[s])
    lines.append(f"{total}: {parts}")
    return "\n".join(lines) + "\n"


def exit_status(outcomes: Sequence[WorkspaceOutcome]) -> int:
    """FLEET-1's exit status for the run (see the module docstring)."""
    if any(o.status == ERROR and not o.busy for o in outcomes):
        return EXIT_ERROR
    if any(o.busy for o in outcomes):
        return EXIT_BUSY
    if any(o.status in (DRIFT, CONFLICT) for o in outcomes):
        return EXIT_CHANGES
    assert all(o.status == UP_TO_DATE for o in outcomes)
    return EXIT_UP_TO_DATE
