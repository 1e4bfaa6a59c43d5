"""What ``nerve-provisioner init --check`` prints (FLEET-2), and its exit status.

The files init would create, re-word or merge, those in conflict (with a diff3-style
preview) and the edited ones it keeps, judged against the templates this version ships;
exit status 1 when anything would change or a conflict waits, 0 otherwise. ``--json`` prints
the same as one workspace of ``fleet check --json``.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.cli.common import EXIT_DIFFERENCE, EXIT_OK
from provisioner.fleet.report import JSON_SCHEMA
from provisioner.fleet.run import UP_TO_DATE, file_actions, status_of
from provisioner.workspace.init import SOURCE_FLAG

if TYPE_CHECKING:
    from provisioner.workspace.init import InitResult

_WORDS = {
    "create": "would create",
    "reword": "would re-word",
    "merge": "would merge",
    "conflict": "conflict",
    "keep": "would keep",
}


def print_check(result: InitResult, config_dir: Path, *, as_json: bool) -> int:
    """Print what init would do to ``result.workspace``; the exit status (FLEET-2)."""
    status = status_of(result.placement, updated=False)
    actions = file_actions(result.placement)
    if as_json:
        document = {
            "schema": JSON_SCHEMA,
            "workspace": str(result.workspace),
            "status": status,
            "files": [{"path": a.path, "action": a.action} for a in actions],
        }
        print(json.dumps(document, indent=2))
    else:
        answers = result.answers
        lines = [
            f"Workspace {result.workspace} ({answers.profile}, worded for "
            f"{answers.memory_backend}): {status.replace('_', ' ')}"
        ]
        for action in actions:
            note = " (edited; the template did not change)" if action.action == "keep" else ""
            lines.append(f"  {_WORDS[action.action]:<14}{action.path}{note}")
            lines += [f"                {line}" for line in action.preview.splitlines()]
        if status != UP_TO_DATE:
            lines.append(f"To apply: {fix_command(result, config_dir)}")
        sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK if status == UP_TO_DATE else EXIT_DIFFERENCE


def fix_command(result: InitResult, config_dir: Path) -> str:
    """The init that makes the change the check listed (with the check's own backend flag)."""
    flag = ""
    if result.backend_source == SOURCE_FLAG:
        flag = f" --memory-backend {result.answers.memory_backend}"
    return (
        f"nerve-provisioner init --non-interactive --workspace "
        f"{shlex.quote(str(result.workspace))} --config-dir {shlex.quote(str(config_dir))}{flag}"
    )
