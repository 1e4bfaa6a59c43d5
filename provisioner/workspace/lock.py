"""One ``nerve init`` at a time per workspace (INIT-7).

The lock is ``.nerve/init.lock`` in the workspace, held with ``flock`` for as long as init runs;
the holder writes its process id into it. The kernel drops the lock when the holder exits, even
after ``kill -9``, so a crashed run never leaves a workspace locked. A second init waits up to
``LOCK_WAIT_S`` seconds, then fails with one line naming the holder's pid.

The holder removes the file when it is done, so a finished workspace holds nothing but what
init rendered. A waiter that got the lock on a file removed meanwhile notices (the path no
longer names its file) and tries again.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable

from provisioner.base.errors import UserError
from provisioner.workspace.fs import LINK_PROBLEM, WorkspaceRoot, machine_fault, refusal

LOCK_PATH = ".nerve/init.lock"  # INIT-7
LOCK_WAIT_S = 5.0  # INIT-7: how long a second init waits for the first
LOCK_POLL_S = 0.1
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceBusy(UserError, RuntimeError):
    """Another init holds the workspace's lock for longer than a second one waits (exit 2 from
    ``init``; a fleet reports the workspace ``busy``, 75)."""


class WorkspaceLock:
    """``with WorkspaceLock(root):`` holds the workspace's init lock for the block."""

    def __init__(
        self,
        root: WorkspaceRoot,
        *,
        wait_s: float = LOCK_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.root = root
        self.wait_s = wait_s
        self.clock = clock
        self.sleep = sleep
        self._fd: int | None = None

    def __enter__(self) -> WorkspaceLock:
        deadline = self.clock() + self.wait_s
        while True:
            fd = self._open()
            if self._take(fd):
                self._fd = fd
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                except BaseException as error:
                    self.__exit__()  # a full disk: let go of the lock, leave no file open
                    fault = machine_fault(error, self.root.path / LOCK_PATH)
                    if fault is None:
                        raise
                    raise fault from error
                return self
            holder = _holder(fd)
            os.close(fd)
            if self.clock() >= deadline:
                raise WorkspaceBusy(
                    f"{self.root.path / LOCK_PATH}: another nerve init (pid {holder}) is "
                    f"provisioning this workspace; waited {self.wait_s:g} s, try again when it "
                    "has finished"
                )
            self.sleep(LOCK_POLL_S)

    def __exit__(self, *_: object) -> None:
        if self._fd is not None:
            try:
                self.root.remove(LOCK_PATH)
            finally:
                os.close(self._fd)  # closing releases the flock
                self._fd = None

    def _open(self) -> int:
        folder, name = LOCK_PATH.rsplit("/", 1)
        with self.root.folder(folder, create=True) as parent:
            assert parent is not None
            try:
                return os.open(name, _LOCK_FLAGS, 0o644, dir_fd=parent)
            except OSError as error:
                fault = machine_fault(error, self.root.path / LOCK_PATH)
                if fault is not None:  # REL-4: read-only, permission, full
                    raise fault from None
                problem = LINK_PROBLEM if error.errno == errno.ELOOP else error.strerror
                raise refusal(self.root.path, LOCK_PATH, str(problem)) from None

    def _take(self, fd: int) -> bool:
        """Lock ``fd``; False when another process holds it or it is no longer the file."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if self._still_the_lock_file(fd):
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def _still_the_lock_file(self, fd: int) -> bool:
        folder, name = LOCK_PATH.rsplit("/", 1)
        with self.root.folder(folder, create=False) as parent:
            if parent is None:
                return False
            try:
                current = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return False
        opened = os.fstat(fd)
        return (current.st_dev, current.st_ino) == (opened.st_dev, opened.st_ino)


def _holder(fd: int) -> str:
    """The pid the holder wrote, or ``unknown`` while it has not written it yet."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"
