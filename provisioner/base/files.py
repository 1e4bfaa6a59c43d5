"""Writing a file so that a failure never leaves half of it behind.

The files the package writes outside a workspace (goldens, the machine-local configuration,
``fleet switch``'s journal) go through ``write_atomically``: the bytes go to a temporary name
beside the target, get their mode, and replace the target in one rename. An interrupted run
leaves either the old file or the new one, never a mix.

A workspace's own files are written the same way, under the same temporary name, but by
``WorkspaceRoot.write`` (``provisioner.workspace.fs``): the workspace belongs to an agent that
may plant links, so that writer walks to the target one folder at a time without following a
link, which a plain path, as here, cannot promise.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMPORARY_SUFFIX = ".nerve-tmp"  # our choice: ".<name>.nerve-tmp" beside the file it will replace


def write_atomically(target: Path, content: bytes, mode: int) -> None:
    """Replace ``target`` with ``content`` and ``mode``, creating parent folders as needed.

    ``OSError`` propagates; the temporary file is removed when the write or rename fails.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}{TEMPORARY_SUFFIX}")
    try:
        temporary.write_bytes(content)
        temporary.chmod(mode)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def file_mode(executable: bool) -> int:
    """The mode of a file the package writes: rw-r--r--, plus x for everyone if executable."""
    return 0o755 if executable else 0o644
