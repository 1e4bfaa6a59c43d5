"""Looking at a render without provisioning: ``nerve render`` and ``nerve diff``.

``render_preview`` writes the render of one backend and profile into a new or empty folder.
``workspace_diff`` renders what init would write for a workspace (the answers recorded there,
optionally another backend's wording) and shows how the files on disk differ; it is the
command that init names for every file it kept (INIT-5).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from provisioner.errors import UserError
from provisioner.golden_diff import unified_diff
from provisioner.init import InitError, InitRequest, resolve_answers
from provisioner.render import MANIFEST_PATH, Answers, RenderedFile, read_manifest, render_workspace

DIFF_LABELS = ("workspace", "nerve-init")  # what is on disk, and what init would write


class PreviewError(UserError, ValueError):
    """A preview that cannot be made (folder not empty, workspace never provisioned)."""


def render_preview(
    backend: str, profile: str, out: Path, data: Mapping[str, str]
) -> list[RenderedFile]:
    """Render into ``out``, which must not exist yet or be empty (nothing is overwritten)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PreviewError(f"{out}: exists and is not an empty folder; expected a new folder")
    request = InitRequest(
        workspace=out, config_dir=out, mode="non-interactive", profile=profile, data=data
    )
    answers = resolve_answers(request, backend, {}, None)
    return render_workspace(answers, out)


def workspace_diff(workspace: Path, backend: str | None, paths: Sequence[str]) -> tuple[str, bool]:
    """The unified diff from the workspace's files to a fresh render; and whether any differ."""
    manifest = read_manifest(workspace)
    if manifest is None:
        raise PreviewError(
            f"{workspace}: no {MANIFEST_PATH}; expected a workspace provisioned by nerve init"
        )
    recorded = dict(manifest.get("answers", {}))
    if backend is not None:
        recorded["memory_backend"] = backend
    answers = Answers.from_data(recorded)
    with tempfile.TemporaryDirectory(prefix="nerve-diff-") as scratch:
        rendered = {f.path: f for f in render_workspace(answers, Path(scratch) / "render")}
    wanted = list(paths) or sorted(path for path in rendered if path != MANIFEST_PATH)
    chunks: list[str] = []
    for path in wanted:
        if path not in rendered:
            raise InitError(f"{path}: not a file that init writes for this workspace")
        target = workspace / path
        current = target.read_bytes() if target.is_file() else b""
        if current != rendered[path].content:
            chunks.append(unified_diff(current, rendered[path].content, path, labels=DIFF_LABELS))
    return "".join(chunks), bool(chunks)
