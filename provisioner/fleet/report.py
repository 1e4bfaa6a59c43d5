"""What a fleet run prints, and its exit status (FLEET-1, FLEET-6, REL-15).

``--json`` prints ``{"schema": 1, "exit_status": N, "changed": N, "workspaces": [...],
"summary": {...}}``: each workspace by the path the inventory gives, its status and its
files' actions, a conflict's file with its diff3-style ``preview``; an ``error`` or ``busy``
workspace also carries its one-line ``error`` and the ``exit_status`` its cause takes, a
``mismatch`` one its ``note``, and one in ``conflict`` its ``resolve`` list: the files a
person must resolve. ``changed`` counts the workspaces in which a file was (update) or would
be (check) created, re-worded or merged; an interrupted run adds ``interrupted`` (the
signal's name). The JSON carries everything the text shows.

A workspace in conflict is still brought up to date everywhere else (a backend switch
re-words every file that merges), and each conflicting file is left as the agent wrote it,
so it may still name the tools of the backend it was worded for until someone resolves it;
the report says so. The text shows one line per workspace, each conflict's diff3-style
preview, the files to resolve, and the counts.

The run's exit status, the first that applies: the signal's (130, 143) when interrupted; 74
when a workspace met an I/O error; 73 when one could not be written (read-only, permission);
2 when one is in error for what a person must fix; 75 when one was busy or its disk full (the
same run works later; nothing else is wrong); 1 when one drifts (check), a conflict is left or
a workspace mismatches; else 0. Conflicts found are in the report whatever the status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from provisioner.base.counts import counted
from provisioner.fleet.run import (
    BUSY,
    CONFLICT,
    DRIFT,
    ERROR,
    MISMATCH,
    NOT_STARTED,
    STATUSES,
    UP_TO_DATE,
    WorkspaceOutcome,
)
from provisioner.runtime.face import (
    EXIT_CANNOT_CREATE,
    EXIT_IO,
    EXIT_LOOK_AT_FILE,
    EXIT_TRY_LATER,
)

JSON_SCHEMA = 1  # FLEET-1
EXIT_UP_TO_DATE = 0  # FLEET-1: every workspace is (check) or ends (update) up to date
EXIT_CHANGES = 1  # FLEET-1: check: drift, conflicts or a mismatch; update: conflicts, mismatch
EXIT_ERROR = EXIT_LOOK_AT_FILE  # FLEET-1: a bad inventory, or a workspace in error
EXIT_BUSY = EXIT_TRY_LATER  # FLEET-1, REL-15: busy or full (EX_TEMPFAIL: the same run works later)
# REL-15: a person must act before a retry helps, the machine's faults first, then the input's;
# only then "try again later", then "look at the report".
EXIT_PRECEDENCE = (EXIT_IO, EXIT_CANNOT_CREATE, EXIT_ERROR, EXIT_BUSY)
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


def report_json(
    outcomes: Sequence[WorkspaceOutcome], *, interrupted: str | None = None
) -> dict[str, Any]:
    """The run as FLEET-1's JSON document; ``interrupted`` names the signal that stopped it."""
    workspaces: list[dict[str, Any]] = []
    for outcome in outcomes:
        files: list[dict[str, Any]] = []
        for action in outcome.files:
            shown: dict[str, Any] = {"path": action.path, "action": action.action}
            if action.action == CONFLICT:
                shown["preview"] = action.preview
            files.append(shown)
        item: dict[str, Any] = {
            "workspace": outcome.entry.workspace,
            "status": outcome.status,
            "changed": outcome.changed,
            "files": files,
        }
        if outcome.error:
            item["error"] = outcome.error
            item["exit_status"] = outcome.exit_status
        if outcome.note:
            item["note"] = outcome.note
        if outcome.status == CONFLICT:
            item["resolve"] = to_resolve(outcome)
        workspaces.append(item)
    document: dict[str, Any] = {
        "schema": JSON_SCHEMA,
        "exit_status": exit_status(outcomes, interrupted_status=_signal_status(interrupted)),
        "changed": sum(1 for outcome in outcomes if outcome.changed),
    }
    if interrupted:
        document["interrupted"] = interrupted
    document.update(workspaces=workspaces, summary=summary(outcomes))
    return document


def report_text(outcomes: Sequence[WorkspaceOutcome], *, update: bool) -> str:
    """One line per workspace, conflict previews below it, and the counts last."""
    words = _ACTION_WORDS if update else _CHECK_WORDS
    lines: list[str] = []
    for outcome in outcomes:
        head = f"{outcome.status:<10} {outcome.entry.workspace}"
        if outcome.error:
            lines.append(f"{head}: {outcome.error}")
            continue
        counts = Counter(f.action for f in outcome.files)
        shown = [f"{counts[a]} {words[a]}" for a in words if counts[a] and a != "keep"]
        lines.append(f"{head}" + (f" ({', '.join(shown)})" if shown else ""))
        if outcome.note:
            lines.append(f"  {outcome.note}")
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
    changed = sum(1 for outcome in outcomes if outcome.changed)
    if changed:
        parts += f"; {changed} {'changed' if update else 'to change'}"
    lines.append(f"{total}: {parts}")
    return "\n".join(lines) + "\n"


def exit_status(outcomes: Sequence[WorkspaceOutcome], *, interrupted_status: int = 0) -> int:
    """The run's exit status (see the module docstring)."""
    if interrupted_status:
        return interrupted_status
    failed = {outcome.exit_status for outcome in outcomes if outcome.status in (ERROR, BUSY)}
    for status in EXIT_PRECEDENCE:
        if status in failed:
            return status
    if failed:  # a status of another kind: the highest, as the most serious
        return max(failed)
    if any(o.status in (DRIFT, CONFLICT, MISMATCH) for o in outcomes):
        return EXIT_CHANGES
    assert all(o.status in (UP_TO_DATE, NOT_STARTED) for o in outcomes)
    return EXIT_UP_TO_DATE


def _signal_status(name: str | None) -> int:
    if not name:
        return 0
    import signal

    return 128 + int(signal.Signals[name])
