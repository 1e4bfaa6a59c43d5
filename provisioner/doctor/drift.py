"""Doctor's drift check: the workspace against what this version would write (FLEET-2).

The other workspace checks compare the files with what the *last* init wrote; after an
upgrade, or a backend switch, every file can be exactly that and still be stale. This check
asks init itself, in its no-write mode (``init --check``), what it would do for the backend
the configuration names: anything to create, re-word or merge, or a conflict, is a WARN
naming the files, with the command that brings the workspace up to date (a WARN as
``workspace.wording`` is: the instance runs, its agent is told stale things). A file the agent
edited where the template did not change is no drift.

A workspace that is missing or was never provisioned is left to ``workspace.manifest``; a
configuration that does not load, to the config checks. An init that refuses (a link where a
file belongs, a bad recorded answer) is a WARN with its own line. A record of init's in the
workspace that is damaged (REL-12: the manifest is ``workspace.manifest``'s, the journal or
the merge bases this check's) is an ERR: init refuses to run on it until a person looks.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from provisioner.base.errors import UserError
from provisioner.doctor.check import ERR, OK, WARN, Check
from provisioner.runtime.face import ProvisionerError
from provisioner.workspace.init import InitWorker
from provisioner.workspace.records import RecordDamaged
from provisioner.workspace.state import read_manifest

CHECK_ID = "workspace.drift"
NAMES_SHOWN = 5  # files named before "and N more"


def drift_checks(workspace: Path, config_dir: Path, env: Mapping[str, str]) -> list[Check]:
    """One check, or none when there is no provisioned workspace to judge."""
    try:
        if read_manifest(workspace) is None:
            return []
    except (UserError, OSError):
        return []
    try:
        worker = InitWorker(workspace, config_dir, "non-interactive", env=dict(env), check=True)
        result = worker.run()
    except RecordDamaged as error:
        return [Check(CHECK_ID, ERR, error.what, advice=error.advice)]
    except ProvisionerError as error:  # bad input, a broken template, a file the machine refused
        return [
            Check(
                CHECK_ID,
                WARN,
                f"what this version would write cannot be worked out: {error}",
                advice=f"run {_init_check(workspace, config_dir)} and fix what it names",
            )
        ]
    placement = result.placement
    backend = result.answers.memory_backend
    if not placement.changes:
        return [Check(CHECK_ID, OK, f"files are what this version writes for {backend}")]
    parts = [
        f"{word} {_names(paths)}"
        for word, paths in (
            ("to create", placement.created),
            ("to re-word", placement.reworded),
            ("to merge", placement.merged),
            ("in conflict", list(placement.conflicts)),
        )
        if paths
    ]
    fix = _init(workspace, config_dir)
    advice = f"run {fix}"
    if placement.conflicts:
        advice += (
            f"; the files in conflict stay as they are: resolve them by hand (see "
            f"{_init_check(workspace, config_dir)}), or add --conflict inline to write markers"
        )
    message = f"files differ from what this version writes for {backend}: {'; '.join(parts)}"
    return [Check(CHECK_ID, WARN, message, advice=advice)]


def _init(workspace: Path, config_dir: Path, *extra: str) -> str:
    words = ["nerve-provisioner", "init", "--non-interactive", *extra]
    words += ["--workspace", str(workspace), "--config-dir", str(config_dir)]
    return shlex.join(words)


def _init_check(workspace: Path, config_dir: Path) -> str:
    return _init(workspace, config_dir, "--check")


def _names(paths: list[str]) -> str:
    shown = ", ".join(sorted(paths)[:NAMES_SHOWN])
    more = len(paths) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown
