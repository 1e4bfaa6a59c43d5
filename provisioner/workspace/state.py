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
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from provisioner.workspace.fs import WorkspaceRoot
from provisioner.workspace.render import MANIFEST_PATH, parse_manifest

JOURNAL_PATH = ".nerve/journal.json"  # INIT-7: the files a run is about to write
RECORD_MODE = 0o644


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


def read_state(root: WorkspaceRoot) -> RecordedState:
    """The manifest with any journal of an interrupted run laid over it."""
    found = root.read(MANIFEST_PATH)
    manifest = parse_manifest(found[0] if found else None) or {"answers": {}, "files": {}}
    journal = _read_journal(root)
    answers = dict(manifest["answers"])
    shipped: dict[str, set[str]] = {path: {d} for path, d in manifest["files"].items()}
    if journal is not None:
        answers.update(journal["answers"])
        for path, digest in journal["files"].items():
            shipped.setdefault(path, set()).add(digest)
    return RecordedState(
        answers=answers,
        shipped={path: frozenset(digests) for path, digests in shipped.items()},
        manifest_files=dict(manifest["files"]),
        interrupted=journal is not None,
        host_shipped=_host_shipped.get() or {},
    )


def write_journal(
    root: WorkspaceRoot, answers: Mapping[str, Any], files: Mapping[str, str]
) -> None:
    """Record the run's answers and the files it is about to write, before it writes any."""
    document = {"answers": dict(answers), "files": dict(files)}
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    root.write(JOURNAL_PATH, text.encode(), RECORD_MODE)


def clear_journal(root: WorkspaceRoot) -> None:
    """The run is complete and the manifest says so: the journal is no longer needed."""
    root.remove(JOURNAL_PATH)


def _read_journal(root: WorkspaceRoot) -> dict[str, Any] | None:
    found = root.read(JOURNAL_PATH)
    return parse_manifest(found[0] if found else None)
