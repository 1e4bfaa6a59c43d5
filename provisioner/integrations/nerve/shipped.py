"""Which files in a workspace are Nerve's shipped text, not an agent's edits (NERVE-10).

Through ``extend_cli``, ``nerve init --memory-backend loom`` runs Nerve's own init first, and
Nerve writes its own ``AGENTS.md``, ``TOOLS.md``, ``MEMORY.md``, skills and config files into
the workspace. The package's init keeps any file it did not write, as an edit — so, left to
itself, a fresh machine would end with Nerve's memU wording "kept as edited". A file is Nerve's
shipped text, to be re-worded like the package's own, when either

* Nerve's init wrote it in this very run (it is new, or its bytes changed, since the snapshot
  taken just before Nerve's init ran), or
* its bytes are those of the text Nerve's installed package ships for that place: its
  templates (``personal/`` and ``worker/`` for the files at the workspace's top, ``skills/``
  and ``config/`` for those folders), read at run time from the installed ``nerve`` package,
  never copied into this one.

Any other file is kept, as before: the agent edited it. ``config/settings.yaml`` is never
counted: Nerve's init writes its wizard's settings there (the model, the timezone, …), which
are configuration to keep, not wording. Reading stops at links (never followed), at
``.nerve/`` and ``.git/``, and at files too large to be Nerve's text.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

NERVE_PACKAGE = "nerve"  # NERVE-10: the installed host package whose shipped text is read
TEMPLATES = "templates"  # NERVE-10: where Nerve's package keeps that text
PROFILE_FOLDERS = ("personal", "worker")  # NERVE-10: Nerve's text for the workspace's top
SHARED_FOLDERS = ("skills", "config")  # NERVE-10: folders whose text lies at the same path
SKIPPED = (".nerve", ".git")  # the package's own records, and a config repository's
NOT_TEXT = frozenset({"config/settings.yaml"})  # NERVE-10: Nerve's settings, kept, not re-worded
MAX_BYTES = 1 << 20  # our choice: a larger file is no shipped text and is not read
MAX_FILES = 5_000  # our choice: a workspace is not walked past this many files

Digests = dict[str, str]


def digest(content: bytes) -> str:
    """The digest the package's manifest records for ``content``."""
    return "sha256:" + hashlib.sha256(content).hexdigest()


def snapshot(workspace: Path) -> Digests:
    """Every regular file of ``workspace`` (relative path → digest); {} when it is absent."""
    return {relative: digest(content) for relative, content in _files(workspace)}


def host_shipped(workspace: Path, before: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """The files of ``workspace`` that are Nerve's shipped text now (path → their digest):
    written since ``before`` (a ``snapshot``), or byte for byte Nerve's shipped text."""
    templates = _nerve_templates()
    found: dict[str, frozenset[str]] = {}
    for relative, content in _files(workspace):
        if relative in NOT_TEXT:
            continue
        now = digest(content)
        if before.get(relative) != now or _ships(templates, relative, content):
            found[relative] = frozenset({now})
    return found


def _nerve_templates() -> Traversable | None:
    """Nerve's installed templates folder, or None without an installed Nerve."""
    try:
        folder = resources.files(NERVE_PACKAGE) / TEMPLATES
    except (ModuleNotFoundError, TypeError):
        return None
    return folder if folder.is_dir() else None


def _ships(templates: Traversable | None, relative: str, content: bytes) -> bool:
    """Whether Nerve's package ships exactly ``content`` for ``relative``."""
    if templates is None:
        return False
    parts = relative.split("/")
    if len(parts) == 1:
        candidates = [templates / folder / relative for folder in PROFILE_FOLDERS]
    elif parts[0] in SHARED_FOLDERS:
        candidates = [_joined(templates, parts)]
    else:
        return False
    for candidate in candidates:
        try:
            if candidate.is_file() and candidate.read_bytes() == content:
                return True
        except OSError:
            continue
    return False


def _joined(root: Traversable, parts: list[str]) -> Traversable:
    for part in parts:
        root = root / part
    return root


def _files(workspace: Path) -> Iterator[tuple[str, bytes]]:
    """``(relative path, bytes)`` of the workspace's regular files, links never followed."""
    if not workspace.is_dir() or workspace.is_symlink():
        return
    seen = 0
    for folder, folders, names in os.walk(workspace, followlinks=False):
        here = Path(folder)
        if here == workspace:
            folders[:] = [name for name in folders if name not in SKIPPED]
        for name in sorted(names):
            seen += 1
            if seen > MAX_FILES:
                return
            path = here / name
            try:
                status = path.lstat()
                if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_BYTES:
                    continue
                content = path.read_bytes()
            except OSError:
                continue
            yield path.relative_to(workspace).as_posix(), content
