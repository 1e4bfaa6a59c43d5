"""MIG-1: memU's store read as memu-py 1.4.0 lays it out in a Nerve install, read only, paged,
and never crashed by what a row holds."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from provisioner.migration.memu_store import (
    MemuItem,
    MemuReadError,
    MemuStore,
    MemuStoreError,
    UnusableRow,
)
from provisioner.migration.memu_values import (
    BAD_ID,
    NO_TEXT,
    NOT_TEXT,
    NOT_UTF8,
    TOO_LONG,
    Dropped,
    date_of,
)
from provisioner.runtime.errors import FileFault
from provisioner.runtime.loom.answers import MEMORY_TEXT_MAX_CHARS, TAGS_MAX
from testbed.memu_db import MemuDb, memu_time


def rows(store: MemuStore) -> list[MemuItem | UnusableRow]:
    return [row for page in store.pages() for row in page]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestAnOrdinaryStore:
    def test_each_item_comes_with_its_text_type_categories_and_dates(self, memu: MemuDb) -> None:
        item_id = memu.add_item(
            "The user's sister lives in Lyon",
            memory_type="profile",
            created_at="2025-03-04 05:06:07.891011",
            updated_at="2025-04-01 00:00:00",
            happened_at="2025-02-28",
            categories=("People", "Family"),
        )
        with MemuStore(memu.path) as store:
            (item,) = rows(store)
        assert isinstance(item, MemuItem)
        assert item.item_id == item_id and item.write.memory_key == f"memu-{item_id}"
        assert item.write.text == "The user's sister lives in Lyon"
        assert item.write.kind == "profile"
        assert item.write.tags == ("Family", "People")
        assert item.write.created_at == "2025-03-04T05:06:07.891011Z"
        assert item.write.updated_at == "2025-04-01T00:00:00Z"
        assert item.write.happened_at == "2025-02-28T00:00:00Z"
        assert item.dropped == ()

    def test_a_time_with_an_offset_is_moved_to_utc(self) -> None:
        dropped = Dropped()
        assert date_of("2025-06-01T02:00:00+02:00", "created_at", dropped) == (
            "2025-06-01T00:00:00Z"
        )
        assert dropped.fields == []

    def test_the_store_is_read_in_pages_in_the_order_it_was_written(self, tmp_path: Path) -> None:
        memu = MemuDb(tmp_path / "memu.sqlite")
        ids = memu.add_items(23)
        with MemuStore(memu.path, page_items=5) as store:
            pages = list(store.pages())
            assert store.count() == 23
        assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
        assert [row.item_id for page in pages for row in page] == ids

    def test_reading_changes_nothing_in_the_file(self, memu: MemuDb) -> None:
        memu.add_items(10)
        before = digest(memu.path)
        with MemuStore(memu.path) as store:
            rows(store)
        assert digest(memu.path) == before
        assert not Path(f"{memu.path}-journal").exists()

    def test_a_store_without_category_tables_gives_items_without_tags(self, memu: MemuDb) -> None:
        memu.add_item("Prefers short answers", categories=("Style",))
        with memu.connect() as db:
            db.execute("DROP TABLE memu_category_items")
        with MemuStore(memu.path) as store:
            (item,) = rows(store)
        assert isinstance(item, MemuItem) and item.write.tags == ()


def damage(path: Path) -> None:
    """Overwrite the pages after the first: the schema still reads, the items do not."""
    data = bytearray(path.read_bytes())
    data[4096:] = b"\xa5" * (len(data) - 4096)
    path.write_bytes(bytes(data))


class TestNotAMemuStore:
    def test_a_missing_file_is_named(self, tmp_path: Path) -> None:
        with pytest.raises(MemuStoreError, match="no such file"):
            MemuStore(tmp_path / "absent.sqlite")
        assert not (tmp_path / "absent.sqlite").exists()

    def test_a_folder_is_not_a_store(self, tmp_path: Path) -> None:
        with pytest.raises(MemuStoreError, match="not a regular file"):
            MemuStore(tmp_path)

    def test_a_file_that_is_not_sqlite_is_named(self, tmp_path: Path) -> None:
        path = tmp_path / "memu.sqlite"
        path.write_bytes(b"this is no database, " * 100)
        with pytest.raises(MemuStoreError, match="cannot be read as a SQLite database"):
            MemuStore(path)

    def test_a_store_damaged_inside_is_a_read_error_of_kind_damaged(self, tmp_path: Path) -> None:
        """REL-4: damaged pages are a file to look at (exit 2), never busy or I/O."""
        memu = MemuDb(tmp_path / "memu.sqlite")
        memu.add_items(40)
        damage(memu.path)
        with MemuStore(memu.path) as store, pytest.raises(MemuReadError) as failed:
            store.count()
            list(store.pages())
        assert failed.value.fault_kind == "damaged"

    def test_an_sqlite_file_without_memu_tables_is_named(self, tmp_path: Path) -> None:
        path = tmp_path / "other.sqlite"
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE notes (id TEXT, body TEXT)")
        with pytest.raises(MemuStoreError, match="has no memu_memory_items table"):
            MemuStore(path)

    def test_an_item_table_without_a_summary_is_named(self, tmp_path: Path) -> None:
        path = tmp_path / "odd.sqlite"
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE memu_memory_items (id TEXT, body TEXT)")
        with pytest.raises(MemuStoreError, match="no summary column"):
            MemuStore(path)

    def test_a_store_damaged_past_its_first_page_is_a_read_error(self, tmp_path: Path) -> None:
        memu = MemuDb(tmp_path / "memu.sqlite")
        memu.add_items(3)
        with MemuStore(memu.path) as store:
            with memu.connect() as db:  # the page query then meets a table that went away
                db.execute("DROP TABLE memu_memory_items")
            with pytest.raises(MemuReadError) as failed:
                list(store.pages())
        assert failed.value.kind == "OperationalError"


class TestHostileRows:
    """Whatever a row holds, reading it never raises; a row that cannot go says why."""

    @pytest.fixture
    def loose(self, tmp_path: Path) -> MemuDb:
        return MemuDb(tmp_path / "loose.sqlite", loose=True)

    def test_rows_that_cannot_go_are_classified_and_the_rest_still_come(
        self, loose: MemuDb
    ) -> None:
        good = loose.add_item("a good one")
        planted = {
            loose.add_item(None): NO_TEXT,
            loose.add_item("   \n\t "): NO_TEXT,
            loose.add_item(b"\x00\x01binary"): NOT_TEXT,
            loose.add_item("x" * (MEMORY_TEXT_MAX_CHARS + 1)): TOO_LONG,
            loose.add_item("é" * (MEMORY_TEXT_MAX_CHARS * 3)): TOO_LONG,
        }
        with loose.connect() as db:
            bad_utf8 = "bad-utf8-id"
            db.execute(
                "INSERT INTO memu_memory_items (id, memory_type, summary)"
                " VALUES (?, 'knowledge', CAST(X'66FF6F80' AS TEXT))",
                (bad_utf8,),
            )
        planted[bad_utf8] = NOT_UTF8
        last = loose.add_item("the last good one")
        with MemuStore(loose.path) as store:
            found = rows(store)
        items = [row.item_id for row in found if isinstance(row, MemuItem)]
        assert items == [good, last]
        refused = {row.item_id: row.reason for row in found if isinstance(row, UnusableRow)}
        assert refused == planted

    @pytest.mark.parametrize(
        "item_id",
        [None, b"blob-id", "", " spaced id", "line\nbreak", "x" * 129, "../../etc", "ü-umlaut"],
    )
    def test_an_id_that_cannot_be_a_key_is_counted_by_row(
        self, loose: MemuDb, item_id: object
    ) -> None:
        with loose.connect() as db:
            db.execute(
                "INSERT INTO memu_memory_items (id, memory_type, summary) VALUES (?, 'event', ?)",
                (item_id, "a fact with a weird id"),
            )
        with MemuStore(loose.path) as store:
            (row,) = rows(store)
        assert isinstance(row, UnusableRow)
        assert (row.item_id, row.reason) == (None, BAD_ID)

    def test_a_huge_id_is_never_loaded_whole(self, loose: MemuDb) -> None:
        loose.add_item("fact", item_id="i" * 10_000_000)
        with MemuStore(loose.path) as store:
            (row,) = rows(store)
        assert isinstance(row, UnusableRow) and row.reason == BAD_ID

    def test_values_loom_cannot_keep_are_left_out_and_named(self, loose: MemuDb) -> None:
        names = ["Alpha", "", "   ", "x" * 101, "tab\tname", *[f"c{n:02d}" for n in range(40)]]
        item_id = loose.add_item(
            "still goes",
            memory_type="Not A Type!",
            created_at=2025,
            updated_at="yesterday",
            happened_at=b"\x00",
            categories=names,
        )
        with loose.connect() as db:
            db.execute("INSERT INTO memu_memory_categories (id, name) VALUES ('nul', NULL)")
            db.execute(
                "INSERT INTO memu_category_items (item_id, category_id) VALUES (?, 'nul')",
                (item_id,),
            )
        with MemuStore(loose.path) as store:
            (item,) = rows(store)
        assert isinstance(item, MemuItem) and item.write.text == "still goes"
        assert (
            item.write.kind,
            item.write.created_at,
            item.write.updated_at,
            item.write.happened_at,
        ) == (None,) * 4
        assert len(item.write.tags) == TAGS_MAX and "Alpha" in item.write.tags
        assert set(item.dropped) == {"kind", "created_at", "updated_at", "happened_at", "tags"}

    def test_a_type_word_of_another_memu_release_is_kept(self, loose: MemuDb) -> None:
        loose.add_item("fact", memory_type="preference")
        with MemuStore(loose.path) as store:
            (item,) = rows(store)
        assert isinstance(item, MemuItem) and item.write.kind == "preference"

    def test_a_store_of_memu_s_own_shape_dates_every_type(self, memu: MemuDb) -> None:
        memu.add_items(8)
        with MemuStore(memu.path) as store:
            found = rows(store)
        assert all(isinstance(row, MemuItem) and row.dropped == () for row in found)
        assert {row.write.kind for row in found if isinstance(row, MemuItem)} == {
            "profile",
            "event",
            "knowledge",
            "behavior",
        }
        first = found[0]
        assert isinstance(first, MemuItem)
        assert first.write.created_at == "2025-01-01T09:00:00.123456Z"
        assert memu_time(0) == "2025-01-01 09:00:00.123456"


class TestBusy:
    def test_a_store_locked_past_the_wait_is_busy_not_damaged(self, memu: MemuDb) -> None:
        memu.add_items(1)
        holder = sqlite3.connect(memu.path)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            with pytest.raises(FileFault) as refused:
                MemuStore(memu.path, read_wait_ms=50)
        finally:
            holder.rollback()
            holder.close()
        assert (refused.value.kind, refused.value.exit_status) == ("busy", 75)  # REL-4
        assert str(refused.value) == f"{memu.path}: busy: another process holds it; try again later"

    def test_a_store_locked_half_way_is_a_read_error_of_kind_busy(self, memu: MemuDb) -> None:
        memu.add_items(3)
        with MemuStore(memu.path, page_items=1, read_wait_ms=50) as store:
            pages = store.pages()
            next(pages)
            holder = sqlite3.connect(memu.path)
            try:
                holder.execute("BEGIN EXCLUSIVE")
                with pytest.raises(MemuReadError) as failed:
                    next(pages)
            finally:
                holder.rollback()
                holder.close()
        assert failed.value.fault_kind == "busy"
