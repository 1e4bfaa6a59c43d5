"""Place a fresh render into a workspace without ever overwriting an edit (INIT-5).

Each rendered file is compared with what is on disk and with the hash the previous render
recorded in ``.nerve/provisioned.json``:

* not on disk: **created**;
* on disk with the same bytes and exec bit: **unchanged**;
* on disk, different, but still exactly what this package shipped last time: **re-worded**;
* on disk, different, and not what was shipped (edited by someone, or written by another
  tool): **kept** as it is, and listed with the command that shows the difference.

A file the previous render shipped that this one does not (``USER.md`` after a switch to the
worker profile) is never removed; it is listed as no longer rendered.

Files are replaced one at a time through a temporary name and the manifest is written last, so
an interrupted run leaves every file whole and a second run finishes the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.files import file_mode, write_atomically
from provisioner.render import MANIFEST_PATH, RenderedFile, read_file


@dataclass
class Placement:
    """What placing a render did, by file path relative to the workspace."""

    created: list[str] = field(default_factory=list)
    reworded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    no_longer_rendered: list[str] = field(default_factory=list)


def place(
    rendered: list[RenderedFile], workspace: Path, previous_manifest: Mapping[str, Any] | None
) -> Placement:
    """Write ``rendered`` into ``workspace`` following the rules of the module docstring."""
    shipped: Mapping[str, str] = (previous_manifest or {}).get("files", {})
    placement = Placement()
    manifest: RenderedFile | None = None
    for new in rendered:
        if new.path == MANIFEST_PATH:
            manifest = new
            continue
        target = workspace / new.path
        current = _read_current(target)
        if current is None:
            _write(target, new)
            placement.created.append(new.path)
        elif current.content == new.content and current.executable == new.executable:
            placement.unchanged.append(new.path)
        elif shipped.get(new.path) == current.digest:
            _write(target, new)
            placement.reworded.append(new.path)
        else:
            placement.kept.append(new.path)
    if manifest is not None:
        _write(workspace / manifest.path, manifest)
    rendered_paths = {new.path for new in rendered}
    placement.no_longer_rendered = sorted(
        path for path in shipped if path not in rendered_paths and (workspace / path).is_file()
    )
    return placement


def _read_current(target: Path) -> RenderedFile | None:
    if not target.is_file():
        return None
    return read_file(target, target.as_posix())


def _write(target: Path, new: RenderedFile) -> None:
    """Write ``new`` over ``target``; an existing file keeps its read/write bits."""
    mode = file_mode(new.executable)
    if target.exists():
        mode = (target.stat().st_mode & 0o666) | (0o111 if new.executable else 0)
    write_atomically(target, new.content, mode)
