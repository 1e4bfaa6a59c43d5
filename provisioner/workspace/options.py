"""How ``nerve-provisioner init`` places its render: written, or only planned (FLEET-2, FLEET-3).

``InitOptions`` carries what a single ``init`` and a fleet run ask of it: ``check`` (plan only;
nothing is written, no folder created, no lock taken), what to do with a conflicting merge,
and where renders come from. A render depends on the answers alone, so a fleet hands every
workspace the same ``Renderer``, which renders each set of answers once (FLEET-5).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.workspace.fs import WorkspaceRoot, prepare_workspace
from provisioner.workspace.merge import CONFLICT_LEAVE, Bases
from provisioner.workspace.placement import Placement, place, plan_placement
from provisioner.workspace.render import Answers, RenderedFile, render_workspace
from provisioner.workspace.state import RecordedState

Renderer = Callable[[Answers], list[RenderedFile]]


def render_once(answers: Answers) -> list[RenderedFile]:
    """The render for ``answers``, made in a scratch folder that is gone afterwards."""
    with tempfile.TemporaryDirectory(prefix="nerve-init-") as scratch:
        return render_workspace(answers, Path(scratch) / "workspace")


@dataclass(frozen=True)
class InitOptions:
    """``check``: write nothing (FLEET-2). ``conflict``: ``leave`` a conflicting file as it
    is, or write diff3 markers into it (``inline``, FLEET-3). ``renderer``: a shared one in a
    fleet (FLEET-5), else a fresh render per run."""

    check: bool = False
    conflict: str = CONFLICT_LEAVE
    renderer: Renderer | None = None

    def render(self, answers: Answers) -> list[RenderedFile]:
        return (self.renderer or render_once)(answers)

    def place(
        self,
        rendered: list[RenderedFile],
        root: WorkspaceRoot,
        recorded: RecordedState,
        answers_record: Mapping[str, Any],
        bases: Bases,
    ) -> Placement:
        """Place ``rendered`` (``provisioner.workspace.placement``), or under ``check`` say
        what placing it would do."""
        if self.check:
            return plan_placement(rendered, root, recorded, bases)
        return place(rendered, root, recorded, answers_record, bases, self.conflict)


@contextmanager
def read_only_root(workspace: Path) -> Iterator[WorkspaceRoot]:
    """The workspace opened for reading only; one that does not exist yet reads as an empty
    folder (every file would be created). A file or a dangling link there is refused with the
    line init gives."""
    if workspace.is_dir():
        with WorkspaceRoot(workspace) as root:
            yield root
        return
    if workspace.exists() or workspace.is_symlink():
        prepare_workspace(workspace)  # raises WorkspaceRefused: never a folder to create here
    with (
        tempfile.TemporaryDirectory(prefix="nerve-check-") as empty,
        WorkspaceRoot(Path(empty)) as root,
    ):
        yield root
