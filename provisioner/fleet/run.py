"""Check or update every workspace of an inventory in one process (FLEET-1, FLEET-5).

Each workspace goes through ``provisioner.workspace.init.run_init`` in non-interactive mode,
as ``nerve-provisioner init --non-interactive`` would run on it (``check``: with
``--check``), so a fleet judges and writes exactly what init does. A bounded pool of
threads works through the inventory; what makes a fleet fast is the shared ``RenderCache``:
a render depends only on the answers, and a fleet's workspaces mostly share them, so the
templates are rendered once per set of answers instead of once per workspace.

A workspace that fails is reported as ``error`` with one line, and the others go on; one
whose init lock another process holds is also ``busy`` (exit status 75). An interrupt stops
the run between workspaces: those under way finish (each is journaled, so even a kill leaves
whole files that the next run completes) and the rest are not started.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from provisioner.errors import TemplateBroken, UserError
from provisioner.fleet.inventory import Entry
from provisioner.runtime.sqlite_file import FileFault, file_fault
from provisioner.workspace.init import InitRequest, run_init
from provisioner.workspace.lock import WorkspaceBusy
from provisioner.workspace.merge import CONFLICT_LEAVE
from provisioner.workspace.options import InitOptions, render_once
from provisioner.workspace.placement import Placement
from provisioner.workspace.render import Answers, RenderedFile

UP_TO_DATE = "up_to_date"  # FLEET-1: the statuses of a workspace
DRIFT = "drift"
CONFLICT = "conflict"
ERROR = "error"
STATUSES = (UP_TO_DATE, DRIFT, CONFLICT, ERROR)
DEFAULT_JOBS = 4  # our choice: renders are shared and files small; more threads buy little


@dataclass(frozen=True)
class FileAction:
    """What init would do (check) or did (update) to one file: FLEET-1's per-file action."""

    path: str
    action: str  # create | reword | merge | conflict | keep
    preview: str = ""  # a conflict's diff3-style preview


@dataclass(frozen=True)
class WorkspaceOutcome:
    """One workspace's status, its files' actions, and the error line of a failed one."""

    entry: Entry
    status: str
    files: tuple[FileAction, ...] = ()
    error: str = ""
    busy: bool = False


def file_actions(placement: Placement) -> tuple[FileAction, ...]:
    """The files a placement creates, re-words, merges, leaves in conflict or keeps, by path."""
    actions = [
        *(FileAction(path, "create") for path in placement.created),
        *(FileAction(path, "reword") for path in placement.reworded),
        *(FileAction(path, "merge") for path in placement.merged),
        *(FileAction(path, "conflict", preview) for path, preview in placement.conflicts.items()),
        *(FileAction(path, "keep") for path in placement.kept),
    ]
    return tuple(sorted(actions, key=lambda action: action.path))


def status_of(placement: Placement, *, updated: bool) -> str:
    """A checked workspace drifts when init would change a file; an updated one is up to date
    once placed, unless a conflict is left."""
    if placement.conflicts:
        return CONFLICT
    if placement.changes and not updated:
        return DRIFT
    return UP_TO_DATE


class RenderCache:
    """Renders shared by every workspace of a run: one per set of answers (FLEET-5).

    A render depends on the answers alone (the template folder is the package's), and
    renders run one at a time anyway (``provisioner.workspace.render``), so one lock is
    enough. ``renders`` counts the renders made, for the benchmark and the tests.
    """

    def __init__(self, render: Callable[[Answers], list[RenderedFile]] = render_once) -> None:
        self._render = render
        self._renders: dict[Answers, list[RenderedFile]] = {}
        self._lock = threading.Lock()
        self.renders = 0

    def __call__(self, answers: Answers) -> list[RenderedFile]:
        with self._lock:
            found = self._renders.get(answers)
            if found is None:
                found = self._renders[answers] = self._render(answers)
                self.renders += 1
            return found


@dataclass
class FleetRun:
    """What to do with every workspace: check, or update with a conflict policy."""

    update: bool = False
    conflict: str = CONFLICT_LEAVE
    jobs: int = DEFAULT_JOBS
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cache: RenderCache = field(default_factory=RenderCache)

    def one(self, entry: Entry) -> WorkspaceOutcome:
        """Check or update one workspace; a failure is its ``error`` outcome, never raised."""
        request = InitRequest(
            workspace=entry.workspace_path,
            config_dir=entry.config_dir,
            mode="non-interactive",
            backend=entry.memory_backend,
            profile=entry.profile,
            env=self.env,
        )
        options = InitOptions(check=not self.update, conflict=self.conflict, renderer=self.cache)
        try:
            result = run_init(request, None, options)
        except WorkspaceBusy as error:
            return WorkspaceOutcome(entry, ERROR, error=_line(error), busy=True)
        except (UserError, TemplateBroken) as error:
            return WorkspaceOutcome(entry, ERROR, error=_line(error))
        except FileFault as fault:
            return WorkspaceOutcome(entry, ERROR, error=_line(fault), busy=fault.kind == "busy")
        except OSError as error:
            named = file_fault(error, error.filename) if error.filename else None
            if named is None:
                raise
            return WorkspaceOutcome(entry, ERROR, error=_line(named), busy=named.kind == "busy")
        placement = result.placement
        return WorkspaceOutcome(
            entry, status_of(placement, updated=self.update), file_actions(placement)
        )

    def all(
        self,
        entries: Sequence[Entry],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[WorkspaceOutcome]:
        """Every entry's outcome, in the inventory's order.

        On an interrupt (``KeyboardInterrupt``) the workspaces not started are cancelled,
        those under way finish, and the interrupt goes on to the caller.
        """
        outcomes: dict[int, WorkspaceOutcome] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, self.jobs), thread_name_prefix="fleet")
        try:
            futures: dict[Future[WorkspaceOutcome], int] = {
                pool.submit(self.one, entry): index for index, entry in enumerate(entries)
            }
            for done in as_completed(futures):
                outcomes[futures[done]] = done.result()
                if progress is not None:
                    progress(len(outcomes), len(entries))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return [outcomes[index] for index in range(len(entries))]


def _line(error: BaseException) -> str:
    return " ".join(str(error).split())
