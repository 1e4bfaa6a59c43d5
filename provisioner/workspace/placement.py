"""Place a fresh render into a workspace without ever overwriting an edit (INIT-5, INIT-7).

Each rendered file is compared with what is on disk and with the digests the workspace
recorded (``provisioner.workspace.state``: the manifest, and the journal of a run that was
interrupted):

* not on disk: **created**;
* on disk with the same bytes and exec bit: **unchanged**;
* on disk, different, but exactly what init wrote (or was about to write): **re-worded**;
* on disk, different, and not init's (edited by someone, or written by another tool): when the
  template changed since init last wrote there, the change is brought in by a three-way merge
  (``provisioner.workspace.merge``, FLEET-3): **merged** when clean, else a **conflict** left
  exactly as it is (markers written only under ``--conflict inline``); when the template did
  not change, **kept** as it is, and listed with the command that shows the difference. An
  edited ``config/settings.yaml`` is always kept: init has read its lockdown as it stands.

A file on a rendered path that is larger than the read cap (``MAX_READ_BYTES``) was never
read whole, so it is never merged, re-worded or written: it is a **conflict** left exactly as
it is, whatever the template did, and named in the report (REL-10).

A file the previous render shipped that this one does not (``USER.md`` after a switch to the
worker profile) is never removed; it is listed as no longer rendered, and while it is still
init's own its digest stays in the manifest, so a switch back re-words it instead of keeping it.

Every path is checked before anything is written (a link or a non-file on the way refuses the
whole run). Then the journal names every file about to be written (and every file about to be
marked, with its new base: REL-15), each file is replaced through a temporary name, the
manifest is replaced, and the journal removed: an interruption at any point leaves whole
files, and the next run finishes the job. Marked files are written first, right after the
journal, so that a file the journal names as about to be marked is, at any interruption,
either marked or still exactly as it was.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from provisioner.base.files import file_mode
from provisioner.config.loader import SETTINGS_FILE
from provisioner.workspace.fs import MAX_READ_BYTES, WorkspaceRefused, WorkspaceRoot
from provisioner.workspace.merge import (
    CONFLICT,
    CONFLICT_INLINE,
    CONFLICT_LEAVE,
    MERGED,
    Bases,
    MergeOutcome,
    read_bases,
    three_way,
    unresolved,
    write_bases,
)
from provisioner.workspace.render import MANIFEST_PATH, RenderedFile, manifest_bytes
from provisioner.workspace.state import (
    InlineWrite,
    RecordedState,
    clear_journal,
    write_journal,
)

MANIFEST_MODE = 0o644
# CONF-3: init reads lockdown (and through it the backend) from this file as it will stand, and
# an edited one stands as it is; a merge would change what init has already read.
NEVER_MERGED = SETTINGS_FILE.as_posix()
PAST_READ_CAP = (  # REL-10: the preview of a file too large to read whole
    f"larger than {MAX_READ_BYTES // (1024 * 1024)} MiB: not read whole, so never merged or "
    "re-worded; left as it is (trim it, or move what it holds elsewhere)"
)


@dataclass
class Placement:
    """What placing a render did, by file path relative to the workspace."""

    created: list[str] = field(default_factory=list)
    reworded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    no_longer_rendered: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)  # FLEET-3
    conflicts: dict[str, str] = field(default_factory=dict)  # FLEET-3: path → diff3 preview

    @property
    def changes(self) -> bool:
        """Whether placing the render writes or would write any file, or leaves a conflict."""
        return bool(self.created or self.reworded or self.merged or self.conflicts)


@dataclass
class _Plan:
    """The writes a placement will make, decided before the first one."""

    placement: Placement = field(default_factory=Placement)
    writes: list[tuple[RenderedFile, int]] = field(default_factory=list)
    carried: dict[str, str] = field(default_factory=dict)
    merge_writes: list[tuple[RenderedFile, int]] = field(default_factory=list)  # not init's own
    marked_writes: list[tuple[RenderedFile, int]] = field(default_factory=list)  # --conflict inline
    marked: dict[str, InlineWrite] = field(default_factory=dict)  # REL-15: journaled first
    old_bases: dict[str, str] = field(default_factory=dict)  # conflicts keep their base (FLEET-3)


def place(
    rendered: list[RenderedFile],
    root: WorkspaceRoot,
    recorded: RecordedState,
    answers_record: Mapping[str, Any],
    bases: Bases | None = None,
    conflict: str = CONFLICT_LEAVE,
) -> Placement:
    """Write ``rendered`` into the workspace following the rules of the module docstring.

    Raises ``WorkspaceRefused`` before writing anything when a path is a link or not a file.
    The base texts are recorded first (FLEET-3), then the journal, the files, the manifest;
    last, the bases the manifest no longer names are dropped.
    """
    bases = read_bases(root) if bases is None else bases
    files = [new for new in rendered if new.path != MANIFEST_PATH]
    plan = _plan(files, root, recorded, bases, conflict)
    named = {*recorded.manifest_files.values(), *(d for s in recorded.shipped.values() for d in s)}
    write_bases(root, bases, bases.record(named, files))
    journaled = {new.path: new.digest for new, _mode in plan.writes}
    write_journal(root, answers_record, journaled, plan.marked)
    for new, mode in [*plan.marked_writes, *plan.writes, *plan.merge_writes]:
        root.write(new.path, new.content, mode)
    owned = {new.path: new.digest for new in files} | plan.carried | plan.old_bases
    root.write(MANIFEST_PATH, manifest_bytes(answers_record, owned), MANIFEST_MODE)
    clear_journal(root)
    write_bases(root, bases, bases.record(owned.values(), []))  # only what the manifest names
    return plan.placement


def plan_placement(
    rendered: list[RenderedFile],
    root: WorkspaceRoot,
    recorded: RecordedState,
    bases: Bases | None = None,
) -> Placement:
    """What ``place`` would do, without writing anything (FLEET-2 ``init --check``)."""
    files = [new for new in rendered if new.path != MANIFEST_PATH]
    bases = read_bases(root) if bases is None else bases
    return _plan(files, root, recorded, bases, CONFLICT_LEAVE).placement


def _plan(
    files: list[RenderedFile],
    root: WorkspaceRoot,
    recorded: RecordedState,
    bases: Bases,
    conflict: str,
) -> _Plan:
    plan = _Plan()
    for new in files:
        current = root.read(new.path)
        if current is None:
            plan.writes.append((new, file_mode(new.executable)))
            plan.placement.created.append(new.path)
            continue
        content, mode = current
        executable = bool(mode & stat.S_IXUSR)
        if len(content) > MAX_READ_BYTES:  # REL-10: only its head was read
            plan.placement.conflicts[new.path] = PAST_READ_CAP
            _keep_base(plan, new.path, recorded)
        elif content == new.content and executable == new.executable:
            plan.placement.unchanged.append(new.path)
        elif recorded.is_inits(new.path, RenderedFile(new.path, content, executable).digest):
            kept_bits = (mode & 0o666) | (0o111 if new.executable else 0)
            plan.writes.append((new, kept_bits))
            plan.placement.reworded.append(new.path)
        else:
            _plan_edited(plan, new, content, mode, recorded, bases, conflict)
    _plan_left_files(plan, {new.path for new in files}, root, recorded)
    return plan


def _plan_edited(
    plan: _Plan,
    new: RenderedFile,
    ours: bytes,
    mode: int,
    recorded: RecordedState,
    bases: Bases,
    conflict: str,
) -> None:
    """An edited file: kept, merged, or a conflict, by what changed since init wrote it.

    The base is the text behind the digest the manifest names for the path. A path the
    package never wrote is the agent's own file, kept. When the base is unknown, nothing can
    be merged: a conflict, the file left as it is.
    """
    base_digest = recorded.manifest_files.get(new.path)
    if new.path == NEVER_MERGED:
        plan.placement.kept.append(new.path)
        return
    if base_digest is None or base_digest == new.digest:
        outcome = unresolved(ours)  # markers written earlier stay reported until resolved
        if outcome is None:
            plan.placement.kept.append(new.path)
            return
    else:
        base = bases.text(base_digest)
        if base is None:
            outcome = MergeOutcome(
                CONFLICT, None, "no base recorded: what init last wrote here is unknown", False
            )
        else:
            outcome = three_way(base, ours, new.content)
    if outcome.action == MERGED and outcome.content is not None:
        plan.merge_writes.append((RenderedFile(new.path, outcome.content, False), mode))
        plan.placement.merged.append(new.path)
    elif outcome.action == CONFLICT:
        plan.placement.conflicts[new.path] = outcome.preview
        if conflict == CONFLICT_INLINE and outcome.content is not None:
            plan.marked_writes.append((RenderedFile(new.path, outcome.content, False), mode))
            before = RenderedFile(new.path, ours, False).digest
            plan.marked[new.path] = InlineWrite(base=new.digest, before=before)
        else:
            _keep_base(plan, new.path, recorded)
    else:
        plan.placement.kept.append(new.path)


def _keep_base(plan: _Plan, path: str, recorded: RecordedState) -> None:
    """A file left as it is keeps the base the manifest names for it (FLEET-3)."""
    base_digest = recorded.manifest_files.get(path)
    if base_digest is not None:
        plan.old_bases[path] = base_digest


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
        if len(current[0]) > MAX_READ_BYTES:
            continue  # REL-10: only its head was read; never init's
        digest = RenderedFile(path, current[0], False).digest
        if recorded.is_inits(path, digest):
            plan.carried[path] = digest
