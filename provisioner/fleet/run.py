"""Check or update every workspace of an inventory in one process (FLEET-1, FLEET-5).

Each workspace goes through its own ``provisioner.workspace.init.InitWorker`` in
non-interactive mode, as ``nerve-provisioner init --non-interactive`` would run on it
(``check``: with ``--check``), so a fleet judges and writes exactly what init does. A bounded
pool of threads works through the inventory; what makes a fleet fast is the one
``RenderCache`` the run hands to every worker as its renderer: a render depends only on the
answers, so each set of answers is rendered once, and a set after the first of its profile and
backend is rendered through the compiled templates of the cache's one Jinja environment rather
than by a Copier run of its own.

A workspace that fails is reported as ``error`` with one line and the exit status its cause
takes (REL-15: 2 for what a person must fix in the inventory or the workspace, 73, 74 or 75
for a fault of the machine, as every command gives them), and the others go on; one whose
init lock another process holds is ``busy`` (75). A workspace worded for one backend while its
configuration names another is ``mismatch``, never up to date (FLEET-1). An interrupt stops
the run between workspaces: those under way finish (each is journaled, so even a kill leaves
whole files that the next run completes), the rest are ``not_started``, and the run returns
what it has, with ``interrupted`` set, for the report.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from provisioner.base.errors import TemplateBroken
from provisioner.fleet.inventory import Entry, workspace_refusal
from provisioner.runtime.face import (
    EXIT_LOOK_AT_FILE,
    EXIT_TRY_LATER,
    FileFault,
    ProvisionerError,
    file_fault,
    masked,
)
from provisioner.workspace.init import InitWorker
from provisioner.workspace.jinja_render import RenderCache
from provisioner.workspace.lock import WorkspaceBusy
from provisioner.workspace.merge import CONFLICT_LEAVE
from provisioner.workspace.placement import Placement

UP_TO_DATE = "up_to_date"  # FLEET-1: the statuses of a workspace
DRIFT = "drift"
CONFLICT = "conflict"
MISMATCH = "mismatch"  # FLEET-1: worded for one backend, configured for the other
BUSY = "busy"  # FLEET-1: another process holds it; the same run works later
ERROR = "error"
NOT_STARTED = "not_started"  # FLEET-1: an interrupted run never reached it
STATUSES = (UP_TO_DATE, DRIFT, CONFLICT, MISMATCH, BUSY, ERROR, NOT_STARTED)
CHANGING_ACTIONS = ("create", "reword", "merge")  # FLEET-1: what makes a workspace changed
DEFAULT_JOBS = 4  # our choice: renders are shared and files small; more threads buy little
FDS_PER_JOB = 16  # REL-13: a workspace's folder, lock, journal, a file and its temporary, twice
FDS_KEPT = 64  # REL-13: descriptors left to the process itself (Python, the inventory, stdio)


@dataclass(frozen=True)
class FileAction:
    """What init would do (check) or did (update) to one file: FLEET-1's per-file action."""

    path: str
    action: str  # create | reword | merge | conflict | keep
    preview: str = ""  # a conflict's diff3-style preview


@dataclass(frozen=True)
class WorkspaceOutcome:
    """One workspace's status, its files' actions, the error line of a failed or busy one and
    the exit status its cause takes (REL-15), or the line that says why it mismatches."""

    entry: Entry
    status: str
    files: tuple[FileAction, ...] = ()
    error: str = ""
    exit_status: int = 0
    note: str = ""

    @property
    def busy(self) -> bool:
        return self.status == BUSY

    @property
    def changed(self) -> bool:
        """Whether a file was (update) or would be (check) created, re-worded or merged."""
        return any(action.action in CHANGING_ACTIONS for action in self.files)


def jobs_allowed() -> int:
    """How many workspaces this process may handle at once: what its open-file limit leaves
    (REL-13), ``FDS_PER_JOB`` each after ``FDS_KEPT``; at least 1."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return DEFAULT_JOBS
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, (soft - FDS_KEPT) // FDS_PER_JOB)


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


def status_of(placement: Placement, *, updated: bool, mismatch: bool = False) -> str:
    """A checked workspace drifts when init would change a file; an updated one is up to date
    once placed, unless a conflict is left, or its wording and configuration name different
    backends (``mismatch``, FLEET-1)."""
    if placement.conflicts:
        return CONFLICT
    if placement.changes and not updated:
        return DRIFT
    if mismatch:
        return MISMATCH
    return UP_TO_DATE


@dataclass
class FleetRun:
    """What to do with every workspace: check, or update with a conflict policy."""

    update: bool = False
    conflict: str = CONFLICT_LEAVE
    jobs: int = DEFAULT_JOBS
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    cache: RenderCache = field(default_factory=RenderCache)
    interrupted: bool = False

    def one(self, entry: Entry) -> WorkspaceOutcome:
        """Check or update one workspace; a failure is its ``error`` outcome, never raised."""
        worker = InitWorker(
            workspace=entry.workspace_path,
            config_dir=entry.config_dir,
            mode="non-interactive",
            backend=entry.memory_backend,
            profile=entry.profile,
            env=self.env,
            check=not self.update,
            conflict=self.conflict,
            renderer=self.cache,
        )
        try:
            refusal = workspace_refusal(entry)
            if refusal is not None:
                return WorkspaceOutcome(entry, ERROR, error=refusal, exit_status=EXIT_LOOK_AT_FILE)
            result = worker.run()
        except ProvisionerError as error:
            return _failed(entry, error)
        except OSError as error:  # a write the machine refused, not yet named as a file fault
            named = file_fault(error, error.filename or entry.workspace_path)
            if named is None:
                raise
            return _failed(entry, named)
        placement = result.placement
        wording = result.answers.memory_backend
        configured = result.configured_backend
        mismatch = configured is not None and configured != wording
        return WorkspaceOutcome(
            entry,
            status_of(placement, updated=self.update, mismatch=mismatch),
            file_actions(placement),
            note=(
                f"worded for {wording} while its configuration names {configured}; "
                "set the backend in the configuration, or word it for the configured one"
            )
            if mismatch
            else "",
        )

    def all(
        self,
        entries: Sequence[Entry],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[WorkspaceOutcome]:
        """Every entry's outcome, in the inventory's order.

        On an interrupt (``KeyboardInterrupt``) the workspaces not started are cancelled and
        reported ``not_started``, those under way finish and are reported, and
        ``interrupted`` is set; the caller says so and exits with the signal's status.
        """
        outcomes: dict[int, WorkspaceOutcome] = {}
        pool = ThreadPoolExecutor(max_workers=max(1, self.jobs), thread_name_prefix="fleet")
        futures: dict[Future[WorkspaceOutcome], int] = {}
        try:
            for index, entry in enumerate(entries):
                futures[pool.submit(self.one, entry)] = index
            for done in as_completed(futures):
                outcomes[futures[done]] = done.result()
                if progress is not None:
                    progress(len(outcomes), len(entries))
        except KeyboardInterrupt:
            self.interrupted = True
            pool.shutdown(wait=True, cancel_futures=True)
            for future, index in futures.items():
                if index not in outcomes and future.done() and not future.cancelled():
                    outcomes[index] = future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return [
            outcomes.get(index) or WorkspaceOutcome(entry, NOT_STARTED)
            for index, entry in enumerate(entries)
        ]


def _failed(entry: Entry, error: ProvisionerError) -> WorkspaceOutcome:
    """The outcome of a workspace whose init raised ``error``: that workspace's status, never
    the run's end (REL-15).

    The status is the error's own (75 busy or full, 73 read-only or permission, 74 I/O, 2 input
    or a damaged file), except that a template that cannot be rendered is 2 here: in a fleet it
    is a file someone must look at, like any other. A workspace another process holds is
    ``busy``, every other failure ``error``.
    """
    held = isinstance(error, WorkspaceBusy) or (
        isinstance(error, FileFault) and error.kind == "busy"
    )
    if isinstance(error, TemplateBroken):
        status = EXIT_LOOK_AT_FILE
    elif isinstance(error, WorkspaceBusy):  # the same run works once the other init is done
        status = EXIT_TRY_LATER
    else:
        status = error.exit_status
    return WorkspaceOutcome(
        entry, BUSY if held else ERROR, error=error_line(error), exit_status=status
    )


def error_line(error: BaseException) -> str:
    """The error as one line, no URL's credentials in it (REL-14)."""
    return masked(" ".join(str(error).split()))
