"""Reading and writing inside a workspace without ever following a link out of it (INIT-7).

The workspace belongs to the agent, which may be hostile: it can replace ``config/`` with a
link to a folder elsewhere, put a link where init writes a file, or a FIFO where init reads one.
``WorkspaceRoot`` opens the workspace folder once and reaches every file below it one path
component at a time, relative to the folder above, refusing any component that is a link
(``O_NOFOLLOW``). So nothing is written, replaced or removed outside the workspace through a
link of any depth, even when a link appears between a check and a write.

A link, a folder where a file belongs, a file where a folder belongs, or anything that is not a
regular file (FIFO, socket, device) on a path init uses is refused with ``WorkspaceRefused``,
one line naming the path; links elsewhere in the workspace are left alone. A fault of the
machine itself (a full disk, a read-only file system, permission denied, an I/O error) is a
``FileFault`` naming the path instead, with the exit status every command gives it (REL-4).

Writes are atomic, as ``provisioner.base.files.write_atomically``'s are outside a workspace: the
bytes go to ``.<name>.nerve-tmp`` beside the target (a leftover of an interrupted run is removed
first, without following it) and replace the target in one rename.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath

from provisioner.base.errors import UserError
from provisioner.base.files import TEMPORARY_SUFFIX
from provisioner.runtime.face import FileFault, file_fault

# INIT-7: init's files are kilobytes; a bigger file is read only this far, which is enough to
# know it is not init's (its bytes and digest cannot match), and bounds what a planted huge
# file costs.
MAX_READ_BYTES = 16 * 1024 * 1024
FOLDER_MODE = 0o755
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceRefused(UserError, OSError):
    """A path init uses is a link or not the kind of entry it must be; nothing was written."""


def refusal(workspace: Path, relative: str, problem: str) -> WorkspaceRefused:
    return WorkspaceRefused(f"{workspace / relative}: {problem}")


LINK_PROBLEM = (
    "is a symbolic link; init writes nothing through a link (replace it with a plain "
    "file or folder, or remove it)"
)


def prepare_workspace(workspace: Path) -> Path:
    """Create ``workspace`` (and its parents) when missing; return it.

    The path is the operator's: a link to an existing folder is followed (once, here). A
    dangling link, a file, a FIFO, or a folder that cannot be created or opened is a
    ``WorkspaceRefused`` naming it.
    """
    if workspace.is_symlink() and not workspace.exists():
        raise WorkspaceRefused(f"{workspace}: is a link to nothing; expected a workspace folder")
    if workspace.exists() and not workspace.is_dir():
        raise WorkspaceRefused(f"{workspace}: exists and is not a folder; expected a workspace")
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise machine_fault(error, workspace) or WorkspaceRefused(
            f"{workspace}: cannot be created ({error.strerror or type(error).__name__}); "
            "expected a writable folder"
        ) from None
    return workspace


@contextmanager
def read_only_root(workspace: Path) -> Iterator[WorkspaceRoot]:
    """The workspace opened for reading only (``init --check``, FLEET-2): nothing is created.

    One that does not exist yet reads as an empty folder (every file would be created). A file
    or a dangling link there is refused with the line ``prepare_workspace`` gives.
    """
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


class WorkspaceRoot:
    """The open workspace folder; every path below it is relative, with ``/`` separators."""

    def __init__(self, workspace: Path) -> None:
        self.path = workspace
        try:
            self._fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise machine_fault(error, workspace) or WorkspaceRefused(
                f"{workspace}: cannot be opened ({error.strerror}); expected a workspace folder"
            ) from None

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> WorkspaceRoot:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- folders -------------------------------------------------------------------------

    @contextmanager
    def folder(self, relative: str, *, create: bool) -> Iterator[int | None]:
        """A descriptor of the folder ``relative`` (``""`` is the workspace), or None if absent.

        With ``create``, missing folders are made. Every component is opened without following
        links; a link or a non-folder is refused.
        """
        fd: int | None = os.dup(self._fd)
        walked = ""
        try:
            for part in _parts(relative):
                walked = f"{walked}/{part}" if walked else part
                assert fd is not None
                child = self._open_child_folder(fd, part, walked, create=create)
                os.close(fd)
                fd = child
                if fd is None:
                    break
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _open_child_folder(
        self, parent: int, name: str, walked: str, *, create: bool
    ) -> int | None:
        for _attempt in range(2):
            try:
                return os.open(name, _FOLDER_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    os.mkdir(name, FOLDER_MODE, dir_fd=parent)
                except FileExistsError:
                    continue  # made by someone else meanwhile: open it on the next attempt
                except OSError as error:
                    raise self._os_refusal(walked, error) from None
            except OSError as error:
                raise self._folder_refusal(parent, name, walked, error) from None
        raise refusal(self.path, walked, "changed while init opened it; run init again")

    def _folder_refusal(self, parent: int, name: str, walked: str, error: OSError) -> Exception:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.lstat(name, dir_fd=parent).st_mode
            except OSError:
                mode = 0
            if stat.S_ISLNK(mode):
                return refusal(self.path, walked, LINK_PROBLEM)
            return refusal(self.path, walked, f"is {_kind(mode)}; expected a folder")
        return self._os_refusal(walked, error)

    def _os_refusal(self, relative: str, error: OSError) -> WorkspaceRefused | FileFault:
        fault = machine_fault(error, self.path / relative)
        if fault is not None:
            return fault
        reason = error.strerror or type(error).__name__
        return refusal(
            self.path, relative, f"cannot be used ({reason}); expected a writable folder"
        )

    # --- files ---------------------------------------------------------------------------

    def read(self, relative: str) -> tuple[bytes, int] | None:
        """The bytes and mode of the regular file ``relative``; None when nothing is there.

        A link, folder, FIFO or device at the path (or a link on the way) is refused. A file
        larger than ``MAX_READ_BYTES`` is read only that far (plus one byte).
        """
        folder, name = _split(relative)
        with self.folder(folder, create=False) as parent:
            if parent is None:
                return None
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                return None
            except OSError as error:
                raise self._file_refusal(parent, name, relative, error) from None
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                os.close(fd)
                raise refusal(self.path, relative, f"is {_kind(mode)}; expected a file")
            with os.fdopen(fd, "rb") as handle:
                try:
                    return handle.read(MAX_READ_BYTES + 1), mode
                except OSError as error:
                    fault = machine_fault(error, self.path / relative)
                    if fault is None:
                        raise
                    raise fault from error

    def _file_refusal(self, parent: int, name: str, relative: str, error: OSError) -> Exception:
        if error.errno == errno.ELOOP:
            return refusal(self.path, relative, LINK_PROBLEM)
        return self._os_refusal(relative, error)

    def check_writable(self, relative: str) -> None:
        """Refuse now what ``write`` would refuse later: links and non-files on the path."""
        self.read(relative)

    def write(self, relative: str, content: bytes, mode: int) -> None:
        """Replace the file ``relative`` with ``content`` and ``mode`` in one rename."""
        folder, name = _split(relative)
        temporary = f".{name}{TEMPORARY_SUFFIX}"
        with self.folder(folder, create=True) as parent:
            assert parent is not None  # created
            self._remove_entry(parent, temporary)
            try:
                fd = os.open(temporary, _CREATE_FLAGS, mode & 0o777, dir_fd=parent)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(content)
                    os.fchmod(handle.fileno(), mode & 0o777)
                self._refuse_non_file(parent, name, relative)
                os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException as error:
                self._remove_entry(parent, temporary)
                fault = machine_fault(error, self.path / relative)
                if fault is not None:
                    raise fault from error
                raise

    def remove(self, relative: str) -> None:
        """Remove the entry ``relative`` itself (a link is removed, never followed)."""
        folder, name = _split(relative)
        with self.folder(folder, create=False) as parent:
            if parent is not None:
                self._remove_entry(parent, name)

    def _refuse_non_file(self, parent: int, name: str, relative: str) -> None:
        try:
            mode = os.lstat(name, dir_fd=parent).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISLNK(mode):
            raise refusal(self.path, relative, LINK_PROBLEM)
        if not stat.S_ISREG(mode):
            raise refusal(self.path, relative, f"is {_kind(mode)}; expected a file")

    @staticmethod
    def _remove_entry(parent: int, name: str) -> None:
        with suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent)


def write_refusal(error: OSError, workspace: Path) -> Exception:
    """Why init could not write: a ``FileFault`` for a fault of the machine, naming the file
    when the error names one (a file in the configuration folder is named as such, REL-4),
    else ``WorkspaceRefused``."""
    path = Path(error.filename) if error.filename else workspace
    return machine_fault(error, path) or WorkspaceRefused(
        f"{path}: cannot be written ({error.strerror}); expected a writable workspace"
    )


def machine_fault(error: BaseException, path: Path) -> FileFault | None:
    """``error`` as a ``FileFault`` naming ``path`` when it is a fault of the machine (busy, full,
    read-only, permission, I/O), else None: the caller then words its own refusal.

    ``path`` is named, not the error's ``filename``: below the workspace that is a bare name
    relative to an open folder, or a temporary one, and a write through a descriptor has none.
    """
    if isinstance(error, FileFault):
        return error
    if not isinstance(error, OSError):
        return None
    return file_fault(error, path)


def _parts(relative: str) -> list[str]:
    parts = [part for part in PurePosixPath(relative).parts if part not in ("", ".")]
    if any(part == ".." or part.startswith("/") for part in parts):
        raise ValueError(f"{relative!r}: expected a path inside the workspace")
    return parts


def _split(relative: str) -> tuple[str, str]:
    parts = _parts(relative)
    if not parts:
        raise ValueError(f"{relative!r}: expected a file path inside the workspace")
    return "/".join(parts[:-1]), parts[-1]


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISREG, "a file"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file or folder")
