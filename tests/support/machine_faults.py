"""Real faults of the machine for the tests of REL-4: a full disk, a read-only file system, a
file another process holds, a damaged page.

A full disk is a small tmpfs filled to its last block, and a read-only file system a
read-only bind mount of a folder: both need root (CI runs the suite as root). Without root a
test asks for the fault it can make (``chmod`` stops a user who is not root) or skips, saying
why. A lock is held by a second process, as another sweep or Nerve's engine would hold it;
``spellings`` gives the other ways a path can name the same state file.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from provisioner.runtime.state import StateStore
from tests.support.repo import REPO_ROOT

SMALL_DISK = "256k"  # room for the files a test sets up, and soon filled
DAMAGE_FROM = 100  # the first byte after SQLite's file header: page 1's own content
DAMAGE_TO = 8192  # through page 2: the schema and the first table are unreadable
DAMAGE_BYTE = 0x5A
HOLD_READY = "held\n"  # what a holding process prints once its hold is taken
EXIT_WAIT_S = 60  # a generous bound on a holder's exit once told to let go

# What a second process runs to hold a file; each takes ``sys.argv[1]`` and keeps the hold
# until its stdin ends.
SQLITE_EXCLUSIVE = """
import sqlite3, sys
database = sqlite3.connect(sys.argv[1], isolation_level=None)
database.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
database.execute("ROLLBACK")
"""
SWEEP_LOCK = """
import sys
from provisioner.runtime.sweep.lock import sweep_lock
with sweep_lock(sys.argv[1], None) as held:
    assert held, "the lock was already held"
    print("held", flush=True)
    sys.stdin.read()
"""
MIGRATION_LOCK = """
import sys
from provisioner.migration.ledger import migration_lock
with migration_lock(sys.argv[1]) as held:
    assert held, "the lock was already held"
    print("held", flush=True)
    sys.stdin.read()
"""


def is_root() -> bool:
    return os.geteuid() == 0


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode})")


def _unmount(folder: Path) -> None:
    """Unmount ``folder``; lazily when a file there is still open, so no mount outlives the
    test (the test itself asserts that nothing was left open, where that is its point)."""
    done = subprocess.run(["umount", str(folder)], capture_output=True, check=False)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def open_below(folder: Path) -> list[str]:
    """The files below ``folder`` this process still has open."""
    found = []
    for entry in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(entry)
        except OSError:
            continue  # closed meanwhile (the descriptor that listed the folder)
        if target.startswith(f"{folder}/"):
            found.append(target)
    return found


@contextmanager
def full_disk(folder: Path) -> Iterator[Path]:
    """``folder`` on a small tmpfs, unmounted afterwards; the test writes what it needs while
    there is room, then ``fill`` takes the last block."""
    if not is_root():
        pytest.skip("a full file system needs a tmpfs, which only root can mount")
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={SMALL_DISK}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        _unmount(folder)


def fill(folder: Path) -> None:
    """Write into ``folder`` until its file system has no block left."""
    descriptor = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(descriptor, b"\0" * 4096):
            pass
    except OSError:
        pass  # no space left: what was asked
    finally:
        os.close(descriptor)


@contextmanager
def read_only(folder: Path) -> Iterator[str]:
    """``folder`` made unwritable; yields the kind of fault a write meets there.

    As root: a read-only bind mount of the folder on itself ("read_only"). Otherwise: the
    folder's mode without write bits ("permission"), which stops any user but root.
    """
    if is_root():
        _mount("--bind", str(folder), str(folder))
        try:
            _mount("-o", "remount,bind,ro", str(folder))
            yield "read_only"
        finally:
            _unmount(folder)
        return
    mode = folder.stat().st_mode
    folder.chmod(0o555)
    try:
        yield "permission"
    finally:
        folder.chmod(mode)


@contextmanager
def process_holding(
    code: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A second Python process running ``code`` with ``args``, as another nerve process would
    hold a file: ``code`` takes its hold, prints ``held`` and keeps the hold until its stdin
    ends, which happens when the block ends (or earlier, when the test writes to it).

    The block starts only once ``held`` was read, so the hold is real before the test goes on,
    ordered by the pipe rather than by a sleep. A process that takes no hold fails the test
    with what it printed; one that does not exit cleanly once let go fails it too.
    """
    holder = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO_ROOT,
    )
    assert holder.stdout is not None and holder.stdin is not None
    ready = holder.stdout.readline()
    if ready != HOLD_READY:
        holder.kill()
        _, error = holder.communicate(timeout=EXIT_WAIT_S)
        raise AssertionError(f"the second process took no hold: {ready!r} {error.strip()}")
    try:
        yield holder
    finally:
        _, error = holder.communicate(timeout=EXIT_WAIT_S)
        assert holder.returncode == 0, error


@contextmanager
def held_by_another_process(path: Path) -> Iterator[subprocess.Popen[str]]:
    """``path`` opened by a second process that holds SQLite's exclusive lock throughout."""
    with process_holding(SQLITE_EXCLUSIVE, str(path)) as holder:
        yield holder


def damage(path: Path) -> None:
    """Overwrite the pages of the SQLite file ``path`` after its header, as a bad disk or a
    stray write would; the file stays a SQLite file whose pages are nonsense."""
    with sqlite3.connect(path) as database:
        database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    database.close()
    data = bytearray(path.read_bytes())
    for index in range(DAMAGE_FROM, min(len(data), DAMAGE_TO)):
        data[index] = DAMAGE_BYTE
    path.write_bytes(bytes(data))


def spellings(tmp_path: Path) -> dict[str, Path]:
    """A real state file and three other ways to reach it (REL-5): a link to the file, a
    link to its folder, and a path through ``..``."""
    real = tmp_path / "real" / "state.sqlite3"
    real.parent.mkdir()
    StateStore(real).close()
    (tmp_path / "link.sqlite3").symlink_to(real)
    (tmp_path / "folder").symlink_to(real.parent, target_is_directory=True)
    (tmp_path / "other").mkdir()
    return {
        "real": real,
        "file symlink": tmp_path / "link.sqlite3",
        "folder symlink": tmp_path / "folder" / "state.sqlite3",
        "dot-dot": tmp_path / "other" / ".." / "real" / "state.sqlite3",
    }
