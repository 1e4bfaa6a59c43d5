"""A memU store shaped as memu-py 1.4.0 lays it out in a Nerve install, built for the tests.

Where each fact of the layout comes from (memU's repository at tag v1.4.0, the version Nerve's
pyproject pins, and Nerve's own source):

* **Table names.** memU's SQLite models call their tables ``sqlite_resources``,
  ``sqlite_memory_categories``, ``sqlite_memory_items`` and ``sqlite_category_items``
  (memU ``src/memu/database/sqlite/schema.py``, ``get_sqlite_sqlalchemy_models``). SQLite
  refuses names that start with ``sqlite_``, so Nerve's bridge builds the same models under
  ``memu_resources``, ``memu_memory_categories``, ``memu_memory_items`` and
  ``memu_category_items`` (Nerve ``nerve/memory/memu_bridge.py``, its sixth patch), the names
  every direct read in Nerve uses.
* **Columns every table has.** ``id`` (a string primary key, indexed, a uuid4 by default),
  ``created_at`` (a datetime with the server default now) and ``updated_at``: memU
  ``src/memu/database/sqlite/models.py``, ``SQLiteBaseModelMixin``. Each table also gets the
  fields of memU's scope model, ``DefaultUserModel`` with one ``user_id`` (memU
  ``src/memu/app/settings.py``), indexed as ``ix_<table>__scope`` (``build_sqlite_table_model``);
  Nerve passes no user config, so that default is what a Nerve store has.
* **Items.** ``resource_id``, ``memory_type`` (not null), ``summary`` (text, not null),
  ``embedding_json``, ``happened_at`` and ``extra`` (JSON): ``SQLiteMemoryItemModel``. The six
  memory types are memU's ``MemoryType`` (``src/memu/database/models.py``). Nerve reads
  ``id, memory_type, summary, created_at, updated_at, happened_at`` straight from this table
  (``nerve/agent/tools/handlers/memory.py``, ``nerve/gateway/routes/memory.py``).
* **Categories.** ``name`` (not null, indexed), ``description`` (not null),
  ``embedding_json``, ``summary``: ``SQLiteMemoryCategoryModel``; Nerve reads
  ``id, name, description, summary``.
* **Links.** ``item_id`` and ``category_id`` (both not null) with the unique index
  ``idx_sqlite_category_items_unique`` on ``(item_id, category_id)``:
  ``SQLiteCategoryItemModel``; Nerve joins ``memu_memory_items`` on ``i.id = ci.item_id``
  (``memu_bridge.py``, expanding a category).
* **Dates.** SQLAlchemy keeps a SQLite datetime as text, ``YYYY-MM-DD HH:MM:SS.ffffff``, with
  no zone (memU makes them in UTC); the server default writes ``YYYY-MM-DD HH:MM:SS``. Nerve
  also writes a bare day ``YYYY-MM-DD`` into ``happened_at`` (its event-date sweep), and turns
  a year stored as a number into ``YYYY-01-01 00:00:00`` (``_sanitize_memu_datetimes``).

``loose=True`` builds the same tables without NOT NULL and key constraints, so a test can plant
the rows a damaged or hand-edited store holds (NULL summaries, blobs, duplicate or missing ids).
The statements below are written for this test from those facts.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

MEMU_TYPES = ("profile", "event", "knowledge", "behavior", "skill", "tool")

_STRICT = """
CREATE TABLE memu_resources (
    id VARCHAR NOT NULL, created_at DATETIME DEFAULT (CURRENT_TIMESTAMP) NOT NULL,
    updated_at DATETIME NOT NULL, user_id VARCHAR, url VARCHAR NOT NULL,
    modality VARCHAR NOT NULL, local_path VARCHAR NOT NULL, caption TEXT, embedding_json TEXT,
    PRIMARY KEY (id)
);
CREATE TABLE memu_memory_categories (
    id VARCHAR NOT NULL, created_at DATETIME DEFAULT (CURRENT_TIMESTAMP) NOT NULL,
    updated_at DATETIME NOT NULL, user_id VARCHAR, name VARCHAR NOT NULL,
    description TEXT NOT NULL, embedding_json TEXT, summary TEXT,
    PRIMARY KEY (id)
);
CREATE INDEX ix_memu_memory_categories_name ON memu_memory_categories (name);
CREATE TABLE memu_memory_items (
    id VARCHAR NOT NULL, created_at DATETIME DEFAULT (CURRENT_TIMESTAMP) NOT NULL,
    updated_at DATETIME NOT NULL, user_id VARCHAR, resource_id VARCHAR,
    memory_type VARCHAR NOT NULL, summary TEXT NOT NULL, embedding_json TEXT,
    happened_at DATETIME, extra JSON,
    PRIMARY KEY (id)
);
CREATE INDEX ix_memu_memory_items_id ON memu_memory_items (id);
CREATE INDEX ix_memu_memory_items__scope ON memu_memory_items (user_id);
CREATE TABLE memu_category_items (
    id VARCHAR NOT NULL, created_at DATETIME DEFAULT (CURRENT_TIMESTAMP) NOT NULL,
    updated_at DATETIME NOT NULL, user_id VARCHAR, item_id VARCHAR NOT NULL,
    category_id VARCHAR NOT NULL,
    PRIMARY KEY (id)
);
CREATE UNIQUE INDEX idx_sqlite_category_items_unique ON memu_category_items (item_id, category_id);
"""


def _loose(script: str) -> str:
    """The same tables with no NOT NULL, primary key or unique index: what a damaged store holds."""
    lines = []
    for line in script.splitlines():
        if line.strip().startswith(("PRIMARY KEY", "CREATE UNIQUE INDEX")):
            continue
        lines.append(line.replace(" NOT NULL", ""))
    return "\n".join(lines).replace(",\n);", "\n);")


def memu_time(index: int) -> str:
    """A stored datetime as SQLAlchemy writes it: no zone, microseconds."""
    return f"2025-{1 + index % 12:02d}-{1 + index % 28:02d} 09:{index % 60:02d}:00.123456"


class MemuDb:
    """A memU store at ``path`` for a test to fill."""

    def __init__(self, path: Path, *, loose: bool = False) -> None:
        self.path = path
        self._categories: dict[str, str] = {}
        with self.connect() as db:
            db.executescript(_loose(_STRICT) if loose else _STRICT)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection committed and closed when the block ends."""
        db = sqlite3.connect(self.path)
        try:
            with db:
                yield db
        finally:
            db.close()

    def category(self, name: str) -> str:
        """The id of category ``name``, made on first use."""
        if name not in self._categories:
            category_id = str(uuid.uuid4())
            with self.connect() as db:
                db.execute(
                    "INSERT INTO memu_memory_categories"
                    " (id, created_at, updated_at, name, description, summary)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (category_id, memu_time(0), memu_time(0), name, f"about {name}", None),
                )
            self._categories[name] = category_id
        return self._categories[name]

    def add_item(
        self,
        summary: object,
        *,
        item_id: object = None,
        memory_type: object = "knowledge",
        created_at: object = None,
        updated_at: object = None,
        happened_at: object = None,
        categories: Sequence[str] = (),
    ) -> object:
        """Store one item as memU does (an uuid4 id unless given); returns its id."""
        item_id = str(uuid.uuid4()) if item_id is None else item_id
        created = memu_time(0) if created_at is None else created_at
        extra = json.dumps({"content_hash": "0" * 16, "reinforcement_count": 1})
        category_ids = [self.category(name) for name in categories]
        with self.connect() as db:
            db.execute(
                "INSERT INTO memu_memory_items (id, created_at, updated_at, user_id,"
                " resource_id, memory_type, summary, embedding_json, happened_at, extra)"
                " VALUES (?, ?, ?, NULL, NULL, ?, ?, ?, ?, ?)",
                (
                    item_id,
                    created,
                    created if updated_at is None else updated_at,
                    memory_type,
                    summary,
                    json.dumps([0.1, 0.2]),
                    happened_at,
                    extra,
                ),
            )
            for category_id in category_ids:
                db.execute(
                    "INSERT INTO memu_category_items"
                    " (id, created_at, updated_at, item_id, category_id) VALUES (?, ?, ?, ?, ?)",
                    (str(uuid.uuid4()), created, created, item_id, category_id),
                )
        return item_id

    def add_items(self, count: int, *, prefix: str = "fact") -> list[str]:
        """``count`` ordinary items of every type, some in categories; their ids in order."""
        ids = []
        for index in range(count):
            categories = ("Work", "People")[: index % 3]
            ids.append(
                str(
                    self.add_item(
                        f"{prefix} {index}: the user prefers tea with breakfast number {index}",
                        memory_type=MEMU_TYPES[index % 4],
                        created_at=memu_time(index),
                        happened_at=memu_time(index)[:10] if index % 4 == 1 else None,
                        categories=categories,
                    )
                )
            )
        return ids

    def summaries(self) -> dict[str, str]:
        """Every item's summary by id (as text), for comparing with what Loom holds."""
        with self.connect() as db:
            rows = db.execute("SELECT id, summary FROM memu_memory_items").fetchall()
        return {str(item_id): str(summary) for item_id, summary in rows}
