"""One sweep at a time per state file (SWEEP-11).

Two sweeps over the same state would send the same window twice and race on its watermark.
The lock is an advisory ``flock`` on a file beside the state database, taken without waiting:
a second sweep — in this process or another one, Nerve's engine or ``nerve memory sweep`` —
learns at once that one is running and returns. The operating system drops the lock when its
holder dies (kill -9 included), so a crash never leaves a stale lock behind.

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
    with file_lock(state_path + LOCK_SUFFIX) as held:
        yield held


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
