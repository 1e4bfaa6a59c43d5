"""Real faults of the machine for the tests of REL-4: a full disk, a read-only file system, a
file another process holds, a damaged page.

A full disk is a small tmpfs filled to its last block, and a read-only file system a
read-only bind mount of a folder: both need root (CI runs the suite as root). Without root a
test asks for the fault it can make (``chmod`` stops a user who is not root) or skips, saying
why. The lock is held by a second process, as another sweep or Nerve's engine would hold it.
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

SMALL_DISK = "256k"  # room for the files a test sets up, and soon filled
DAMAGE_FROM = 100  # the first byte after SQLite's file header: page 1's own content
DAMAGE_TO = 8192  # through page 2: the schema and the first table are unreadable
DAMAGE_BYTE = 0x5A


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
def held_by_another_process(path: Path) -> Iterator[None]:
    """``path`` opened by a second process that holds SQLite's exclusive lock throughout."""
    code = (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with process_holding(code, str(path)):
        yield


@contextmanager
def process_holding(
    code: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[str]]:
    """A second Python process running ``code``: it takes something, prints ``held`` and
    keeps it until its stdin closes, which happens when the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


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
