"""memU's own SQLite store, read only, one bounded page at a time (MIG-1).

The layout is memu-py 1.4.0's, the version Nerve pins, as Nerve creates it: memU's SQLite
models name their tables ``sqlite_*``, a prefix SQLite keeps for itself, so Nerve's bridge
builds the same models as ``memu_*`` tables. What the migration reads of them:

* ``memu_memory_items``: ``id`` (text, a uuid4 memU makes), ``summary`` (the memory's text),
  ``memory_type`` (``profile``, ``event``, ``knowledge``, ``behavior``, ``skill``, ``tool``),
  ``created_at`` and ``updated_at`` (SQLAlchemy datetimes, stored as text in UTC without a
  zone), ``happened_at`` (when an event took place; Nerve also writes a bare day there);
* ``memu_memory_categories``: ``id`` and ``name``;
* ``memu_category_items``: ``item_id`` and ``category_id``, one row per item in a category.

Only ``id`` and ``summary`` must be there; a column or table of the rest that is missing is
read as empty. Embeddings, ``extra``, ``resource_id`` and the categories' summaries stay in
memU: Loom makes its own embeddings, and the rest describes memU's pipeline, not the memory.

The file is opened with ``mode=ro``: this connection can never write, create the file or take
Nerve's write lock; a lock met anyway is waited out for ``READ_WAIT_MS``. Pages are read by
``rowid``, ``PAGE_ITEMS`` at a time, each query read to its end, and no value longer than its
use is loaded: a text over Loom's limit is measured, never read. Whatever a row holds, reading
it never raises (``memu_values`` decides what can go); a file that cannot be read at all is a
``MemuStoreError`` (bad input, one line) or, for a fault of the machine (busy past the wait,
permission, the disk failing), a ``FileFault`` naming it (REL-4); one that fails half-way is
a ``MemuReadError``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from provisioner.base.errors import UserError
from provisioner.migration.memu_values import (
    BAD_ID,
    REPEATED_ID,
    SHORT_MAX_BYTES,
    TEXT_MAX_BYTES,
    Dropped,
    Refused,
    date_of,
    item_id_of,
    kind_of,
    memory_key,
    tags_of,
    text_factory,
    text_of,
)
from provisioner.runtime.face import (
    TAGS_MAX,
    FaultKind,
    FileFault,
    MemoryWrite,
    StoreFault,
    classify_file_error,
)

ITEMS_TABLE = "memu_memory_items"  # Nerve's name for memU's sqlite_memory_items
CATEGORIES_TABLE = "memu_memory_categories"  # ... for sqlite_memory_categories
LINKS_TABLE = "memu_category_items"  # ... for sqlite_category_items
REQUIRED_COLUMNS = ("id", "summary")
OPTIONAL_COLUMNS = ("memory_type", "created_at", "updated_at", "happened_at")
PAGE_ITEMS = 100  # our choice: rows per query; a page of full-length texts stays under 8 MiB
READ_WAIT_MS = 5_000  # our choice: Nerve's memU writes are short transactions
CATEGORY_ROWS_READ = TAGS_MAX * 4  # our choice: links read per item, repeats and bad names included
EXPECTED = "expected memU's database (memu.sqlite, memory.sqlite_dsn in Nerve's config)"


class MemuStoreError(UserError):
    """The file cannot be read as memU's store; one line naming it, what is wrong and what is
    expected. Bad input: the command exits 2 and nothing is written anywhere."""


class MemuReadError(StoreFault, RuntimeError):
    """The store failed while a page was read (damaged past its first pages, locked past the
    wait). ``kind`` names SQLite's error class, ``fault_kind`` the file fault it is (REL-4:
    ``busy``, ``io``, ``damaged``, …) or None; the message never holds a row's text."""

    def __init__(self, error: sqlite3.Error) -> None:
        self.kind = type(error).__name__
        self.fault_kind: FaultKind | None = classify_file_error(error)
        super().__init__(f"memU's store could not be read on: {self.fault_kind or self.kind}")


@dataclass(frozen=True)
class MemuItem:
    """One memU item that can go to Loom: its id, and the ``loom_memory_set`` write that
    carries it over (text, kind, tags and dates as Loom can keep them, key ``memu-<id>``).

    ``dropped`` names the fields whose stored value could not be kept (``kind``, ``tags`` or
    a date): the item goes without them.
    """

    item_id: str
    write: MemoryWrite
    dropped: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        """The text's size in UTF-8 bytes."""
        return len(self.write.text.encode("utf-8"))


@dataclass(frozen=True)
class UnusableRow:
    """A row that cannot go to Loom: ``reason`` is one of ``memu_values.REASONS``.

    ``item_id`` is None when the id itself cannot be a key (``bad_id``, ``repeated_id``);
    ``row`` is SQLite's rowid, for a report that can name no id. ``repeated`` is the id a
    ``repeated_id`` row shares with another row: printable, so a report may name it.
    """

    row: int
    item_id: str | None
    reason: str
    repeated: str | None = None


Row = MemuItem | UnusableRow


class MemuStore:
    """memU's store at ``path``, opened read only; ``MemuStoreError`` when it is not one.

    ``page_items`` rows are read per query; a lock is waited out for ``read_wait_ms``
    (``READ_WAIT_MS`` unless given, read when the store opens). Use it as a context manager,
    or call ``close()``.
    """

    def __init__(
        self, path: Path, *, page_items: int = PAGE_ITEMS, read_wait_ms: int | None = None
    ) -> None:
        self.path = Path(path)
        self._page_items = page_items
        self._db = _open(self.path, READ_WAIT_MS if read_wait_ms is None else read_wait_ms)
        try:
            self._columns, self._has_categories = _shape_of(self._db, self.path)
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> MemuStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def count(self) -> int:
        """How many item rows the store holds; ``MemuReadError`` when it cannot say."""
        try:
            (count,) = self._db.execute(f"SELECT COUNT(*) FROM {ITEMS_TABLE}").fetchone()
        except sqlite3.Error as error:
            raise MemuReadError(error) from error
        return int(count)

    def repeated_ids(self) -> frozenset[str]:
        """The ids more than one row holds (REL-8): none in a store with memU's primary key,
        any number in one that lost it. ``MemuReadError`` when the store cannot say."""
        try:
            rows = self._db.execute(
                f"SELECT {_bounded('id')} AS key FROM {ITEMS_TABLE}"
                " WHERE id IS NOT NULL GROUP BY key HAVING COUNT(*) > 1"
            ).fetchall()
        except sqlite3.Error as error:
            raise MemuReadError(error) from error
        return frozenset(item_id for (raw,) in rows if (item_id := item_id_of(raw)) is not None)

    def pages(self) -> Iterator[list[Row]]:
        """Every row, a page at a time, in rowid order; ``MemuReadError`` when a page fails.

        A row whose id another row holds too is an ``UnusableRow`` (``repeated_id``).
        """
        repeated = self.repeated_ids()
        after: float = float("-inf")  # below every rowid, the lowest included
        while True:
            try:
                raw = self._db.execute(self._page_sql(), (after, self._page_items)).fetchall()
                page = [self._row(values, repeated) for values in raw]
            except sqlite3.Error as error:
                raise MemuReadError(error) from error
            if not raw:
                return
            after = raw[-1][0]
            yield page

    def _page_sql(self) -> str:
        short = [_bounded(name) if name in self._columns else "NULL" for name in OPTIONAL_COLUMNS]
        return (
            f"SELECT rowid, {_bounded('id')}, typeof(summary), length(CAST(summary AS BLOB)),"
            f" CASE WHEN length(CAST(summary AS BLOB)) <= {TEXT_MAX_BYTES} THEN summary END,"
            f" {', '.join(short)} FROM {ITEMS_TABLE} WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )

    def _row(self, values: tuple[object, ...], repeated: frozenset[str]) -> Row:
        row, raw_id, sql_type, byte_length, raw_text, raw_type, *raw_dates = values
        assert isinstance(row, int)
        item_id = item_id_of(raw_id)
        if item_id is None:
            return UnusableRow(row, None, BAD_ID)
        if item_id in repeated:
            return UnusableRow(row, None, REPEATED_ID, repeated=item_id)
        text = text_of(raw_text, str(sql_type), byte_length)
        if isinstance(text, Refused):
            return UnusableRow(row, item_id, str(text))
        dropped = Dropped()
        created, updated, happened = (
            date_of(raw, name, dropped)
            for raw, name in zip(raw_dates, OPTIONAL_COLUMNS[1:], strict=True)
        )
        write = MemoryWrite(
            memory_key=memory_key(item_id),
            text=text,
            kind=kind_of(raw_type, dropped),
            tags=tags_of(self._category_names(item_id), dropped),
            created_at=created,
            updated_at=updated,
            happened_at=happened,
        )
        return MemuItem(item_id, write, dropped=tuple(dropped.fields))

    def _category_names(self, item_id: str) -> list[object]:
        if not self._has_categories:
            return []
        rows = self._db.execute(
            f"SELECT {_bounded('c.name')} FROM {LINKS_TABLE} AS l"
            f" JOIN {CATEGORIES_TABLE} AS c ON c.id = l.category_id"
            " WHERE l.item_id = ? LIMIT ?",
            (item_id, CATEGORY_ROWS_READ),
        ).fetchall()
        return [row[0] for row in rows]


def _bounded(column: str) -> str:
    """``column`` as stored when short; a longer value arrives as a blob, which no field takes."""
    return (
        f"CASE WHEN {column} IS NULL OR length(CAST({column} AS BLOB)) <= {SHORT_MAX_BYTES}"
        f" THEN {column} ELSE X'00' END"
    )


def _open(path: Path, read_wait_ms: int) -> sqlite3.Connection:
    """A read-only connection to ``path``; ``MemuStoreError`` when there is no such file."""
    if not path.exists():
        raise MemuStoreError(f"{path}: no such file; {EXPECTED}")
    if not path.is_file():
        raise MemuStoreError(f"{path}: is not a regular file; {EXPECTED}")
    try:
        database = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            isolation_level=None,
            timeout=read_wait_ms / 1000,
        )
    except sqlite3.Error as error:
        raise _unreadable(path, error) from None
    database.text_factory = text_factory
    return database


def _shape_of(database: sqlite3.Connection, path: Path) -> tuple[frozenset[str], bool]:
    """The item table's columns, and whether the category tables are there to join."""
    try:
        tables = {str(row[0]) for row in database.execute("SELECT name FROM sqlite_master")}
        if ITEMS_TABLE not in tables:
            raise MemuStoreError(f"{path}: has no {ITEMS_TABLE} table; {EXPECTED}")
        columns = frozenset(
            str(row[1]) for row in database.execute(f"PRAGMA table_info({ITEMS_TABLE})")
        )
        lacking = [name for name in REQUIRED_COLUMNS if name not in columns]
        if lacking:
            raise MemuStoreError(
                f"{path}: its {ITEMS_TABLE} table has no {' and no '.join(lacking)} column; "
                f"{EXPECTED}"
            )
        database.execute(f"SELECT rowid FROM {ITEMS_TABLE} LIMIT 0").fetchall()
        joined = {CATEGORIES_TABLE, LINKS_TABLE} <= tables and _has_link_columns(database)
    except sqlite3.Error as error:
        raise _unreadable(path, error) from None
    return columns, joined


def _unreadable(path: Path, error: sqlite3.Error) -> Exception:
    """Why the store cannot be read, as one line naming it (REL-4): a ``FileFault`` for a
    fault of the machine (busy past the wait: 75; permission: 73; the disk failing: 74),
    else ``MemuStoreError`` (a file that is not memU's database: 2)."""
    kind = classify_file_error(error)
    if kind is not None and kind != "damaged":
        return FileFault(path, kind, detail=str(error))
    return MemuStoreError(f"{path}: cannot be read as a SQLite database ({error}); {EXPECTED}")


def _has_link_columns(database: sqlite3.Connection) -> bool:
    links = {str(row[1]) for row in database.execute(f"PRAGMA table_info({LINKS_TABLE})")}
    names = {str(row[1]) for row in database.execute(f"PRAGMA table_info({CATEGORIES_TABLE})")}
    return {"item_id", "category_id"} <= links and {"id", "name"} <= names
