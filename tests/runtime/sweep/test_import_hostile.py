"""``nerve memory import`` of hostile lines, as a real process: one line naming the line, exit 2.

A transcripts file may come from anywhere, so every bad line must be named by its number and
its real problem (IMP-1), with nothing imported and never a traceback (CONF-7's rule for bad
input holds for every command).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from provisioner.cli.memory_import import IMPORT_LINE_MAX_BYTES, RECORD_ID_MAX_CHARS
from provisioner.runtime.transcripts import TRANSCRIPTS_VERSION
from tests.support.processes import RunNerve, assert_one_line_error

GOOD = {
    "session_id": "s1",
    "role": "user",
    "content": "I take my tea with lemon.",
    "created_at": "2026-12-01T09:00:00+00:00",
}


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def good_line(**changes: object) -> bytes:
    return json.dumps({**GOOD, **changes}).encode()


def import_file(run_nerve: RunNerve, tmp_path: Path, source: Path):
    (tmp_path / "cfg").mkdir(exist_ok=True)  # a named configuration folder must exist
    return run_nerve(
        "memory",
        "import",
        str(source),
        "--workspace",
        str(tmp_path / "ws"),
        "--config-dir",
        str(tmp_path / "cfg"),
    )


def imported_count(tmp_path: Path) -> int:
    """Messages in the default transcripts database (none when it was never created)."""
    database = tmp_path / "cfg" / "memory" / "transcripts.sqlite3"
    if not database.exists():
        return 0
    with sqlite3.connect(database) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM message").fetchone()[0])


class TestNestingIsBoundedBeforeParsing:
    def test_a_line_of_100000_nested_brackets_is_one_line_naming_it_and_exit_2(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: nesting is named as the problem; no RecursionError traceback, nothing in."""
        deep = b"[" * 100_000 + b"]" * 100_000
        source = write_lines(tmp_path / "in.jsonl", [good_line(), deep, good_line()])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "in.jsonl", "line 2:", "nested too deep")
        assert "RecursionError" not in result.stderr
        assert imported_count(tmp_path) == 0

    def test_deep_nesting_inside_an_object_field_is_named_the_same_way(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the depth counts wherever the brackets open, not only at the line's start."""
        deep = b'{"session_id": ' + b"{" * 50_000 + b"}" * 50_000 + b"}"
        source = write_lines(tmp_path / "in.jsonl", [deep])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "in.jsonl", "line 1:", "nested too deep")
        assert imported_count(tmp_path) == 0

    def test_brackets_inside_a_message_s_text_are_text_and_are_imported(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the depth scan skips strings, so a message about brackets is no bad line."""
        text = "[{" * 5_000 + ' \\" ]} still text'
        source = write_lines(tmp_path / "in.jsonl", [good_line(content=text)])
        result = import_file(run_nerve, tmp_path, source)
        assert result.returncode == 0, result.stderr
        assert imported_count(tmp_path) == 1


class TestNulIsRefused:
    def test_an_escaped_nul_in_the_content_is_refused_naming_the_line_and_field(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: ``\\u0000`` in a string is a NUL like a raw one; nothing is imported."""
        source = write_lines(
            tmp_path / "in.jsonl", [good_line(), good_line(content="before\u0000after")]
        )
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "in.jsonl", "line 2:", "content", "NUL")
        assert imported_count(tmp_path) == 0

    def test_an_escaped_nul_in_the_session_id_is_refused_too(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: every field is checked, not only the message's text."""
        source = write_lines(tmp_path / "in.jsonl", [good_line(session_id="s\u00001")])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "line 1:", "session_id", "NUL")

    def test_a_raw_nul_byte_is_refused_naming_the_line_and_the_byte(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: a raw NUL is named as a NUL, not as some JSON error."""
        raw = good_line(content="beforeXafter").replace(b"X", b"\x00")
        source = write_lines(tmp_path / "in.jsonl", [raw])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "line 1:", "NUL byte at byte")
        assert imported_count(tmp_path) == 0


class TestTheRealProblemIsNamed:
    def test_bytes_that_are_not_utf8_are_named_by_their_position(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the UTF-8 byte that breaks, not "not a JSON object"."""
        broken = good_line(content="caf~").replace(b"~", b"\xff")
        source = write_lines(tmp_path / "in.jsonl", [broken])
        result = import_file(run_nerve, tmp_path, source)
        position = broken.index(b"\xff") + 1
        assert_one_line_error(result, "line 1:", "not UTF-8", f"byte {position}")

    def test_broken_json_is_named_by_its_column(self, run_nerve: RunNerve, tmp_path: Path) -> None:
        """IMP-1: the JSON column where the line stops being JSON."""
        broken = b'{"session_id": "s1",, "role": "user"}'
        source = write_lines(tmp_path / "in.jsonl", [broken])
        result = import_file(run_nerve, tmp_path, source)
        column = broken.index(b",,") + 2  # the second comma, counted from 1
        assert_one_line_error(result, "line 1:", f"not JSON at column {column}")

    def test_unknown_keys_holding_line_breaks_stay_on_one_line_and_are_capped(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """CONF-7: a key is quoted, so its line break cannot start a line of its own."""
        extra = {f"k{n}\nInjected: yes": n for n in range(50)}
        source = write_lines(tmp_path / "in.jsonl", [good_line(**extra)])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "line 1:", "unknown keys", "and 47 more")

    @pytest.mark.parametrize(
        ("line", "kind"),
        [(b'["a", "list"]', "a list"), (b'"text"', "a string"), (b"42", "a number")],
    )
    def test_json_that_is_no_object_is_named_with_what_it_is(
        self, run_nerve: RunNerve, tmp_path: Path, line: bytes, kind: str
    ) -> None:
        """IMP-1: valid JSON but no message: "not a JSON object", and what it is instead."""
        source = write_lines(tmp_path / "in.jsonl", [good_line(), line])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "line 2:", f"not a JSON object ({kind})")
        assert imported_count(tmp_path) == 0

    def test_a_line_past_the_length_bound_is_named_without_being_kept(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: a line longer than the bound is refused by its length, not parsed."""
        long_line = good_line(content="x" * IMPORT_LINE_MAX_BYTES)
        source = write_lines(tmp_path / "in.jsonl", [good_line(), long_line, good_line()])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "line 2:", f"longer than {IMPORT_LINE_MAX_BYTES} bytes")
        assert imported_count(tmp_path) == 0


class TestTheRecordIdIsChecked:
    @pytest.mark.parametrize(
        ("value", "problem"),
        [
            (True, "id must be a string or an integer"),
            (1.5, "id must be a string or an integer"),
            ({"n": 1}, "id must be a string or an integer"),
            ("", f"id must be 1 to {RECORD_ID_MAX_CHARS} characters"),
            ("x" * (RECORD_ID_MAX_CHARS + 1), f"id must be 1 to {RECORD_ID_MAX_CHARS} characters"),
            (10 ** (RECORD_ID_MAX_CHARS + 1), f"id must be 1 to {RECORD_ID_MAX_CHARS} characters"),
            ("m\u00001", "id holds a NUL character"),
            ("m\ud800", "id holds a lone surrogate"),
        ],
        ids=["bool", "float", "object", "empty", "long", "many-digits", "nul", "surrogate"],
    )
    def test_an_id_that_is_no_name_is_refused_naming_the_line(
        self, run_nerve: RunNerve, tmp_path: Path, value: object, problem: str
    ) -> None:
        """IMP-1: an ``id`` is a string of bounded length, or an integer; nothing else."""
        source = write_lines(tmp_path / "in.jsonl", [good_line(), good_line(id=value)])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, "line 2:", problem)
        assert imported_count(tmp_path) == 0

    def test_the_longest_id_allowed_is_imported(self, run_nerve: RunNerve, tmp_path: Path) -> None:
        source = write_lines(tmp_path / "in.jsonl", [good_line(id="x" * RECORD_ID_MAX_CHARS)])
        result = import_file(run_nerve, tmp_path, source)
        assert result.returncode == 0, result.stderr
        assert imported_count(tmp_path) == 1


class TestHostileTranscriptsFiles:
    """A transcripts file is input too: an old or damaged one is migrated or named, never a
    traceback, and a failed import leaves it holding what it held."""

    def database(self, tmp_path: Path, script: str) -> Path:
        path = tmp_path / "cfg" / "memory" / "transcripts.sqlite3"
        path.parent.mkdir(parents=True)
        connection = sqlite3.connect(path)
        connection.executescript(script)
        connection.commit()
        connection.close()
        return path

    def test_an_old_file_holding_bytes_that_are_no_text_is_migrated(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: rows are keyed by their bytes: broken UTF-8, numbers and blobs in the old
        table's text columns cannot stop the migration, and the good rows still count."""
        good = GOOD
        broken_utf8 = "X'fffe41'"
        self.database(
            tmp_path,
            f"""
            CREATE TABLE message (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
            INSERT INTO message (session_id, role, content, created_at)
                VALUES ('s1', 'user', CAST({broken_utf8} AS TEXT), 'not a time'),
                       ('s1', 'user', 42, X'00ff'),
                       ('{good["session_id"]}', '{good["role"]}', '{good["content"]}',
                        '{good["created_at"]}');
            """,
        )
        source = write_lines(tmp_path / "in.jsonl", [good_line(), good_line(content="new")])
        result = import_file(run_nerve, tmp_path, source)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("imported 1 new message (1 already there)")
        assert imported_count(tmp_path) == 4

    def test_a_file_claiming_the_new_schema_without_its_key_is_one_line(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """A file whose version says keyed but whose table has no key column: named, exit 2,
        and its rows stay as they were."""
        path = self.database(
            tmp_path,
            f"""
            CREATE TABLE message (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
                role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL);
            INSERT INTO message (session_id, role, content, created_at)
                VALUES ('s0', 'user', 'kept', '2026-01-01T00:00:00Z');
            PRAGMA user_version = {TRANSCRIPTS_VERSION};
            """,
        )
        source = write_lines(tmp_path / "in.jsonl", [good_line()])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, str(path), "cannot store the messages", "nothing imported")
        assert imported_count(tmp_path) == 1

    def test_an_old_table_without_the_columns_of_a_message_is_one_line(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """Some other program's ``message`` table is no transcripts file: named, not altered."""
        path = self.database(tmp_path, "CREATE TABLE message (id INTEGER PRIMARY KEY, body);")
        source = write_lines(tmp_path / "in.jsonl", [good_line()])
        result = import_file(run_nerve, tmp_path, source)
        assert_one_line_error(result, str(path), "cannot be opened as the transcripts")
        with sqlite3.connect(path) as connection:
            columns = [row[1] for row in connection.execute("PRAGMA table_info(message)")]
            version = connection.execute("PRAGMA user_version").fetchone()[0]
        connection.close()
        assert (columns, version) == (["id", "body"], 0)
