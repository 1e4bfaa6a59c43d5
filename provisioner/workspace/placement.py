"""Place a fresh render into a workspace without ever overwriting an edit (INIT-5, INIT-7).

Each rendered file is compared with what is on disk and with the digests the workspace
recorded (``provisioner.workspace.state``: the manifest, and the journal of a run that was
interrupted):

* not on disk: **created**;
* on disk with the same bytes and exec bit: **unchanged**;
* on disk, different, but exactly what init wrote (or was about to write): **re-worded**;
* on disk, different, and not init's (edited by someone, or written by another tool): **kept**
  as it is, and listed with the command that shows the difference.

A file the previous render shipped that this one does not (``USER.md`` after a switch to the
worker profile) is never removed; it is listed as no longer rendered, and while it is still
init's own its digest stays in the manifest, so a switch back re-words it instead of keeping it.

Every path is checked before anything is written (a link or a non-file on the way refuses the
whole run). Then the journal names every file about to be written, each file is replaced
through a temporary name, the manifest is replaced, and the journal removed: an interruption at
any point leaves whole files, and the next run finishes the job.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.files import file_mode
from provisioner.workspace.fs import WorkspaceRefused, WorkspaceRoot
from provisioner.workspace.render import MANIFEST_PATH, RenderedFile, manifest_bytes
from provisioner.workspace.state import RecordedState, clear_journal, write_journal

MANIFEST_MODE = 0o644


@dataclass
class Placement:
    """What placing a render did, by file path relative to the workspace."""

    created: list[str] = field(default_factory=list)
    reworded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    no_longer_rendered: list[str] = field(default_factory=list)


@dataclass
class _Plan:
    """The writes a placement will make, decided before the first one."""

    placement: Placement = field(default_factory=Placement)
    writes: list[tuple[RenderedFile, int]] = field(default_factory=list)
    carried: dict[str, str] = field(default_factory=dict)


def place(
    rendered: list[RenderedFile],
    root: WorkspaceRoot,
    recorded: RecordedState,
    answers_record: Mapping[str, Any],
) -> Placement:
    """Write ``rendered`` into the workspace following the rules of the module docstring.

    Raises ``WorkspaceRefused`` before writing anything when a path is a link or not a file.
    """
    files = [new for new in rendered if new.path != MANIFEST_PATH]
    plan = _plan(files, root, recorded)
    write_journal(root, answers_record, {new.path: new.digest for new, _mode in plan.writes})
    for new, mode in plan.writes:
        root.write(new.path, new.content, mode)
    owned = {new.path: new.digest for new in files} | plan.carried
    root.write(MANIFEST_PATH, manifest_bytes(answers_record, owned), MANIFEST_MODE)
    clear_journal(root)
    return plan.placement


def _plan(files: list[RenderedFile], root: WorkspaceRoot, recorded: RecordedState) -> _Plan:
    plan = _Plan()
    for new in files:
        current = root.read(new.path)
        if current is None:
            plan.writes.append((new, file_mode(new.executable)))
            plan.placement.created.append(new.path)
            continue
        content, mode = current
        executable = bool(mode & stat.S_IXUSR)
        if content == new.content and executable == new.executable:
            plan.placement.unchanged.append(new.path)
        elif recorded.is_inits(new.path, RenderedFile(new.path, content, executable).digest):
            kept_bits = (mode & 0o666) | (0o111 if new.executable else 0)
            plan.writes.append((new, kept_bits))
            plan.placement.reworded.append(new.path)
        else:
            plan.placement.kept.append(new.path)
    _plan_left_files(plan, {new.path for new in files}, root, recorded)
    return plan


def _plan_left_files(
    plan: _Plan, rendered_paths: set[str], root: WorkspaceRoot, recorded: RecordedState
) -> None:
    """List files init wrote earlier that this render has not; carry those still init's."""
    for path in sorted(recorded.shipped):
        if path in rendered_paths or path == MANIFEST_PATH:
            continue
        try:
            current = root.read(path)
        except (WorkspaceRefused, ValueError):
            continue  # a link or odd entry there now: not init's, and left alone
        if current is None:
            continue
        plan.placement.no_longer_rendered.append(path)
        digest = RenderedFile(path, current[0], False).digest
        if recorded.is_inits(path, digest):
            plan.carried[path] = digest
