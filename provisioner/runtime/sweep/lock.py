"""One sweep at a time per state file (SWEEP-11).

Two sweeps over the same state would send the same window twice and race on its watermark.
The lock is an advisory ``flock`` on a file beside the state database, taken without waiting:
a second sweep — in this process or another one, Nerve's engine or ``nerve memory sweep`` —
learns at once that one is running and returns. The operating system drops the lock when its
holder dies (kill -9 included), so a crash never leaves a stale lock behind.

The lock belongs to the state file, not to how its path is spelt (REL-5): the path is made
real first — symlinks followed, ``..`` and relative parts resolved — and the lock file sits
beside the real file. Two sweeps of one state reached through a symlink, a relative path or
another folder's ``..`` meet on the same lock; the second one learns another sweep is running.

A state store that lives in memory (``":memory:"``) has no file; its lock is held in this
process only.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

LOCK_SUFFIX = ".sweep-lock"

_in_memory_held: set[int] = set()
_in_memory_guard = threading.Lock()


@contextmanager
def sweep_lock(state_path: str, owner: object) -> Iterator[bool]:
    """Yield True while this caller holds the sweep lock of ``state_path``, else False.

    ``owner`` identifies an in-memory store (its lock is per object). The lock is released
    when the block ends, whatever happens inside it.
    """
    if state_path == ":memory:":
        with _held_in_memory(id(owner)) as held:
            yield held
        return
    with file_lock(lock_path_of(state_path, LOCK_SUFFIX)) as held:
        yield held


def lock_path_of(state_path: str | os.PathLike[str], suffix: str) -> str:
    """The lock file of the state at ``state_path``: beside its real file, named by ``suffix``.

    Every spelling of one file — through a symlink (of the file or of a folder above it), a
    relative path, ``..`` — gives the same lock path (REL-5). A state file not made yet is
    resolved as far as its path exists, as it will be once made.
    """
    return os.path.realpath(state_path) + suffix


@contextmanager
def file_lock(lock_path: str) -> Iterator[bool]:
    """Yield True while this process holds an exclusive ``flock`` on ``lock_path``, else False.

    Taken without waiting; the file is made when missing (mode 0600) and never removed, so
    two processes always lock the same inode. Closing the descriptor releases the lock, and
    the operating system does so when the holder dies.
    """
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(descriptor)


@contextmanager
def _held_in_memory(key: int) -> Iterator[bool]:
    with _in_memory_guard:
        if key in _in_memory_held:
            held = False
        else:
            _in_memory_held.add(key)
            held = True
    try:
        yield held
    finally:
        if held:
            with _in_memory_guard:
                _in_memory_held.discard(key)
