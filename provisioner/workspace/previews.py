"""Looking at a render without provisioning: ``nerve render`` and ``nerve diff``.

``render_preview`` writes the render of one backend and profile into a new or empty folder.
``workspace_diff`` renders what init would write for a workspace (the answers recorded there,
optionally another backend's wording) and shows how the files on disk differ; it is the
command that init names for every file it kept (INIT-5).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from pathlib import Path

from provisioner.backends import BACKEND_NAMES, DEFAULT_BACKEND, get_backend
from provisioner.base.errors import UserError
from provisioner.templating.questions import echo
from provisioner.workspace.diff import unified_diff
from provisioner.workspace.fs import WorkspaceRoot, machine_fault
from provisioner.workspace.init import InitError, InitWorker
from provisioner.workspace.render import MANIFEST_PATH, RenderedFile, render_workspace
from provisioner.workspace.state import read_state

DIFF_LABELS = ("workspace", "nerve-init")  # what is on disk, and what init would write


class PreviewError(UserError, ValueError):
    """A preview that cannot be made (folder not empty, workspace never provisioned)."""


def render_preview(
    backend: str, profile: str | None, out: Path, data: Mapping[str, str]
) -> tuple[list[RenderedFile], list[str]]:
    """Render into ``out``, which must not exist yet or be empty (nothing is overwritten).

    ``profile`` None leaves the profile to ``data`` (``--data profile=worker``) or the
    default. Returns the files and any warnings (a ``--data`` value the profile does not use).
    """
    if out.is_symlink() and not out.exists():
        raise PreviewError(f"{out}: is a link to nothing; expected a new or empty folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PreviewError(f"{out}: exists and is not an empty folder; expected a new folder")
    worker = InitWorker(
        workspace=out, config_dir=out, mode="non-interactive", profile=profile, data=data
    )
    warnings: list[str] = []
    answers = worker.resolve_answers(backend, {}, warnings)
    try:
        out.mkdir(parents=True, exist_ok=True)
        return render_workspace(answers, out, worker.renderer.folder), warnings
    except OSError as error:
        fault = machine_fault(error, Path(error.filename) if error.filename else out)
        if fault is not None:  # REL-4: full, read-only, permission or I/O, with its status
            raise fault from None
        reason = error.strerror or type(error).__name__
        raise PreviewError(f"{out}: cannot be written ({reason}); expected a new folder") from None


def workspace_diff(workspace: Path, backend: str | None, paths: Sequence[str]) -> tuple[str, bool]:
    """The unified diff from the workspace's files to a fresh render; and whether any differ.

    The answers are those the workspace recorded, each checked like init checks it, so a
    tampered manifest is one line, not a traceback. Files are read without following links.
    """
    if not workspace.is_dir():
        raise PreviewError(f"{workspace}: not a folder; expected a workspace")
    with WorkspaceRoot(workspace) as root:
        recorded = read_state(root)
        if not recorded.provisioned:
            raise PreviewError(
                f"{workspace}: no {MANIFEST_PATH}; expected a workspace provisioned by nerve init"
            )
        wording = backend or recorded.answers.get("memory_backend") or DEFAULT_BACKEND
        try:
            get_backend(str(wording))
        except UserError:
            raise PreviewError(
                f"{workspace / MANIFEST_PATH}: memory_backend {echo(wording)} is not a memory "
                f"backend; expected one of: {', '.join(BACKEND_NAMES)}"
            ) from None
        worker = InitWorker(workspace=workspace, config_dir=workspace, mode="non-interactive")
        answers = worker.resolve_answers(str(wording), recorded.answers)
        rendered = {f.path: f for f in worker.renderer.render(answers)}
        wanted = [_relative(path) for path in paths] or sorted(
            path for path in rendered if path != MANIFEST_PATH
        )
        chunks: list[str] = []
        for path in wanted:
            if path not in rendered:
                raise InitError(f"{path}: not a file that init writes for this workspace")
            current = _current(root, path)
            if current != rendered[path].content:
                new = rendered[path].content
                chunks.append(unified_diff(current, new, path, labels=DIFF_LABELS))
    return "".join(chunks), bool(chunks)


def _relative(path: str) -> str:
    """``./AGENTS.md`` and ``config//settings.yaml`` as init names them."""
    normal = posixpath.normpath(path.replace("\\", "/"))
    if normal.startswith(("/", "../")) or normal in ("..", "."):
        raise InitError(f"{path}: expected a file path inside the workspace")
    return normal


def _current(root: WorkspaceRoot, path: str) -> bytes:
    """The file's bytes (empty when absent); a link or non-file there is ``WorkspaceRefused``."""
    found = root.read(path)
    return found[0] if found else b""
