"""What a workspace records about init: the manifest, and the journal of a run in progress.

``.nerve/provisioned.json`` (the manifest) holds the answers and the digest of every file init
counts as its own. Before init writes a single file it writes ``.nerve/journal.json``: the
answers of this run and the digest of every file it is about to write. The manifest is replaced
after the last file, and the journal removed after that. So at every moment, even after a
``kill -9``, a file on disk is init's own when it matches the manifest or the journal, and a
user's edit when it matches neither (INIT-7); the next run treats the journal's answers as the
recorded ones and finishes the job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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

    @property
    def provisioned(self) -> bool:
        return bool(self.shipped) or bool(self.answers)

    def is_inits(self, path: str, digest: str) -> bool:
        """True when ``digest`` is what init wrote (or was about to write) at ``path``."""
        return digest in self.shipped.get(path, frozenset())


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
