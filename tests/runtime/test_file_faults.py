"""File faults are told apart by what the operator should do, on real files (REL-4)."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from provisioner.runtime.errors import (
    EXIT_CANNOT_CREATE,
    EXIT_IO,
    EXIT_LOOK_AT_FILE,
    EXIT_TRY_LATER,
    FileFault,
    classify_file_error,
    faults_named,
    file_fault,
)


class TestClassifyFileError:
    @pytest.mark.parametrize(
        ("number", "kind", "status"),
        [
            (errno.ENOSPC, "full", EXIT_TRY_LATER),
            (errno.EDQUOT, "full", EXIT_TRY_LATER),
            (errno.EROFS, "read_only", EXIT_CANNOT_CREATE),
            (errno.EACCES, "permission", EXIT_CANNOT_CREATE),
            (errno.EIO, "io", EXIT_IO),
        ],
    )
    def test_an_os_error_is_told_by_its_errno(self, number: int, kind: str, status: int) -> None:
        fault = file_fault(OSError(number, os.strerror(number), "/x/state.sqlite"), "/x/s")
        assert fault is not None
        assert (fault.kind, fault.exit_status) == (kind, status)
        assert str(fault).startswith("/x/s: ")

    def test_an_error_that_is_not_the_machine_s_is_not_a_fault(self) -> None:
        assert classify_file_error(OSError(errno.ENOENT, "missing")) is None
        assert classify_file_error(ValueError("bad value")) is None
        assert classify_file_error(sqlite3.IntegrityError("UNIQUE constraint failed")) is None

    def test_a_file_that_is_not_a_database_is_damaged(self, tmp_path: Path) -> None:
        path = tmp_path / "state.sqlite"
        path.write_bytes(b"this is no database, just text that fills a page" * 100)
        with pytest.raises(FileFault) as caught, faults_named(path):
            sqlite3.connect(path).execute("SELECT * FROM sqlite_master").fetchall()
        assert caught.value.kind == "damaged"
        assert caught.value.exit_status == EXIT_LOOK_AT_FILE
        assert str(path) in str(caught.value)

    def test_a_write_lock_held_by_another_connection_is_busy(self, tmp_path: Path) -> None:
        path = tmp_path / "state.sqlite"
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN EXCLUSIVE")
        try:
            waiter = sqlite3.connect(path, timeout=0, isolation_level=None)
            with pytest.raises(FileFault) as caught, faults_named(path):
                waiter.execute("INSERT INTO t VALUES (1)")
            assert caught.value.kind == "busy"
            assert "try again later" in str(caught.value)
            assert "aside" not in str(caught.value)
            waiter.close()
        finally:
            holder.execute("ROLLBACK")
            holder.close()

    def test_anything_else_passes_through_unchanged(self) -> None:
        with pytest.raises(KeyError), faults_named("/x"):
            raise KeyError("k")


def test_the_sqlite_codes_named_without_importing_sqlite3_are_sqlite3s_own() -> None:
    """The fault table names SQLite's result codes by number so that naming a fault never loads
    sqlite3; each number is the one sqlite3 itself gives that code."""
    import sqlite3

    from provisioner.runtime import errors

    expected = {
        sqlite3.SQLITE_BUSY: "busy",
        sqlite3.SQLITE_LOCKED: "busy",
        sqlite3.SQLITE_FULL: "full",
        sqlite3.SQLITE_READONLY: "read_only",
        sqlite3.SQLITE_PERM: "permission",
        sqlite3.SQLITE_CANTOPEN: "permission",
        sqlite3.SQLITE_IOERR: "io",
        sqlite3.SQLITE_CORRUPT: "damaged",
        sqlite3.SQLITE_NOTADB: "damaged",
    }
    assert expected == errors._SQLITE_KIND
