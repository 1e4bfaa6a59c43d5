"""What a workspace records about init: the manifest, and the journal of a run in progress.

``.nerve/provisioned.json`` (the manifest) holds the answers and the digest of every file init
counts as its own. Before init writes a single file it writes ``.nerve/journal.json``: the
answers of this run and the digest of every file it is about to write. The manifest is replaced
after the last file, and the journal removed after that. So at every moment, even after a
``kill -9``, a file on disk is init's own when it matches the manifest or the journal, and a
user's edit when it matches neither (INIT-7); the next run treats the journal's answers as the
recorded ones and finishes the job.

A host that ran its own setup into the workspace just before (Nerve's init, through
``extend_cli``) names the files that are its shipped text with ``host_shipped_text``: while
that block runs, those files count as init's to re-word too (NERVE-10), never as edits.

A file written with diff3 markers (``--conflict inline``, FLEET-3) is not init's own text, but
the run that marks it counts the new render as its base from then on, so that once a person
resolves the markers the file is theirs, not a conflict again. The journal names each such
file with that base and the digest the file had before: when the next run finds the file
changed from that digest, the marked write happened, and the journal's base stands even
though the manifest was never replaced (REL-15).

Both records are read strictly (``provisioner.workspace.records``, REL-12): a damaged one is
one line naming it, never read as absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.workspace.fs import WorkspaceRefused, WorkspaceRoot
from provisioner.workspace.records import (
    RecordKind,
    damaged,
    object_at,
    read_record,
    string_map,
)
from provisioner.workspace.render import MANIFEST_FORMAT, MANIFEST_PATH, RenderedFile

JOURNAL_PATH = ".nerve/journal.json"  # INIT-7: the files a run is about to write
RECORD_MODE = 0o644
MANIFEST_RECORD = RecordKind(  # REL-12
    MANIFEST_PATH,
    "the manifest nerve-provisioner init writes",
    "Restore it from a backup; or move it aside and run init again with this workspace's "
    "--profile and --data answers (every file there then counts as edited and is kept)",
    MANIFEST_FORMAT,
)
JOURNAL_RECORD = RecordKind(  # REL-12
    JOURNAL_PATH,
    "the journal an interrupted nerve-provisioner init leaves",
    "Move it aside and run init again (the files the interrupted run wrote then count as "
    "edited and are kept)",
)


@dataclass(frozen=True)
class Manifest:
    """What ``.nerve/provisioned.json`` records: the answers, and init's files by digest."""

    answers: Mapping[str, Any]
    files: Mapping[str, str]


@dataclass(frozen=True)
class InlineWrite:
    """A file a ``--conflict inline`` run marks (REL-15): the base it counts from then on,
    and the digest the file had before the run."""

    base: str
    before: str


@dataclass(frozen=True)
class RecordedState:
    """The answers a workspace recorded, and the digests of the files that are init's own."""

    answers: Mapping[str, Any] = field(default_factory=dict)
    shipped: Mapping[str, frozenset[str]] = field(default_factory=dict)
    manifest_files: Mapping[str, str] = field(default_factory=dict)
    interrupted: bool = False
    host_shipped: Mapping[str, frozenset[str]] = field(default_factory=dict)  # NERVE-10

    @property
    def provisioned(self) -> bool:
        return bool(self.shipped) or bool(self.answers)

    def is_inits(self, path: str, digest: str) -> bool:
        """True when ``digest`` is what init wrote (or was about to write) at ``path``, or the
        host's own shipped text there (NERVE-10)."""
        return digest in self.shipped.get(path, frozenset()) or digest in self.host_shipped.get(
            path, frozenset()
        )


# NERVE-10: the host's shipped text in the workspace for the run under way (path → digests).
_host_shipped: ContextVar[Mapping[str, frozenset[str]] | None] = ContextVar(
    "provisioner_host_shipped", default=None
)


@contextmanager
def host_shipped_text(files: Mapping[str, frozenset[str]]) -> Iterator[None]:
    """While the block runs, ``files`` (path → digests of the host's shipped text) count as
    init's own to re-word (NERVE-10)."""
    token = _host_shipped.set(dict(files))
    try:
        yield
    finally:
        _host_shipped.reset(token)


def read_manifest(workspace: Path) -> Manifest | None:
    """The manifest in ``workspace``, read without following links; None when there is none.

    A damaged one is ``RecordDamaged``, a link on the way ``WorkspaceRefused`` (REL-12).
    """
    if not workspace.is_dir():
        return None
    with WorkspaceRoot(workspace) as root:
        return _read_manifest(root)


def read_state(root: WorkspaceRoot) -> RecordedState:
    """The manifest with any journal of an interrupted run laid over it.

    A damaged manifest or journal raises ``RecordDamaged`` naming it (REL-12).
    """
    manifest = _read_manifest(root) or Manifest({}, {})
    journal = _read_journal(root)
    answers = dict(manifest.answers)
    shipped: dict[str, set[str]] = {path: {d} for path, d in manifest.files.items()}
    bases = dict(manifest.files)
    if journal is not None:
        answers.update(journal.answers)
        for path, digest in journal.files.items():
            shipped.setdefault(path, set()).add(digest)
        bases.update(_marked_bases(root, journal.inline))
    return RecordedState(
        answers=answers,
        shipped={path: frozenset(digests) for path, digests in shipped.items()},
        manifest_files=bases,
        interrupted=journal is not None,
        host_shipped=_host_shipped.get() or {},
    )


def _marked_bases(root: WorkspaceRoot, inline: Mapping[str, InlineWrite]) -> dict[str, str]:
    """The bases of the files an interrupted inline run marked (REL-15): a file changed since
    the digest it had before that run was marked (and maybe resolved since); one still as it
    was never was, and keeps the manifest's base."""
    bases: dict[str, str] = {}
    for path, marked in inline.items():
        try:
            current = root.read(path)
        except (WorkspaceRefused, ValueError):
            continue  # a link or odd entry there now: placement refuses it in its turn
        if current is not None and RenderedFile(path, current[0], False).digest != marked.before:
            bases[path] = marked.base
    return bases


def write_journal(
    root: WorkspaceRoot,
    answers: Mapping[str, Any],
    files: Mapping[str, str],
    inline: Mapping[str, InlineWrite] | None = None,
) -> None:
    """Record the run's answers, the files it is about to write, and the files it is about to
    mark with their new base (REL-15), before it writes any."""
    document: dict[str, Any] = {"answers": dict(answers), "files": dict(files)}
    if inline:
        document["inline"] = {
            path: {"base": write.base, "before": write.before} for path, write in inline.items()
        }
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    root.write(JOURNAL_PATH, text.encode(), RECORD_MODE)


def clear_journal(root: WorkspaceRoot) -> None:
    """The run is complete and the manifest says so: the journal is no longer needed."""
    root.remove(JOURNAL_PATH)


def _read_manifest(root: WorkspaceRoot) -> Manifest | None:
    document = read_record(root, MANIFEST_RECORD)
    if document is None:
        return None
    answers = object_at(root, MANIFEST_RECORD, document, "answers")
    return Manifest(answers, string_map(root, MANIFEST_RECORD, document, "files"))


@dataclass(frozen=True)
class _Journal:
    answers: Mapping[str, Any]
    files: Mapping[str, str]
    inline: Mapping[str, InlineWrite]


def _read_journal(root: WorkspaceRoot) -> _Journal | None:
    document = read_record(root, JOURNAL_RECORD)
    if document is None:
        return None
    answers = object_at(root, JOURNAL_RECORD, document, "answers")
    files = string_map(root, JOURNAL_RECORD, document, "files")
    entries = object_at(root, JOURNAL_RECORD, document, "inline") if "inline" in document else {}
    inline: dict[str, InlineWrite] = {}
    for path, entry in entries.items():
        fields = entry if isinstance(entry, dict) else {}
        base, before = fields.get("base"), fields.get("before")
        if not isinstance(base, str) or not isinstance(before, str):
            shown = json.dumps(path)[:80]
            problem = f'"inline" entry {shown} is not a base and a digest'
            raise damaged(root, JOURNAL_RECORD, problem)
        inline[path] = InlineWrite(base, before)
    return _Journal(answers, files, inline)
