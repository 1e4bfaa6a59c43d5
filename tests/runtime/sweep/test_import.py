"""``nerve memory import`` is idempotent (IMP-1), through the real command in a temp folder.

A record's key is its own ``id`` within its session, else its session, time, role and content;
an import stores only the records whose key no message holds yet and says how many were new
and how many already there. Standard input, times without a zone, the memU warning, an old
transcripts file and two imports at once are each run as a person or a script would run them.
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from multiprocessing.context import ForkServerContext
from pathlib import Path

import pytest

from provisioner.cli import memory_import
from provisioner.cli.main import main
from provisioner.runtime.transcripts import TRANSCRIPTS_VERSION
from tests.support.processes import RunNerve, assert_one_line_error

from .racing import PRELOAD, read_output, run_cli

JOIN_TIMEOUT_S = 120.0  # a process still running by then is stuck; the test says so
RACE_ROUNDS = 5  # rounds of two imports started together at a barrier
RACE_MESSAGES = 300  # messages in the file both imports of a round read

# The table as files written before the schema had a version hold it (user_version 0).
OLD_SCHEMA = """
CREATE TABLE message (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX message_by_session ON message (session_id, id);
"""


def record(session: str, n: int, **changes: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "session_id": session,
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"fact {n} of {session}",
        "created_at": f"2026-11-30T10:{n % 60:02d}:00+00:00",
    }
    fields.update(changes)
    return fields


def jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def places(tmp_path: Path) -> list[str]:
    """The instance's folder options; its configuration folder exists, as a named one must."""
    (tmp_path / "cfg").mkdir(exist_ok=True)
    return ["--workspace", str(tmp_path / "ws"), "--config-dir", str(tmp_path / "cfg")]


def transcripts_file(tmp_path: Path) -> Path:
    return tmp_path / "cfg" / "memory" / "transcripts.sqlite3"


def stored(tmp_path: Path) -> list[tuple[str, str, str, str]]:
    """Every stored message, oldest first, as (session, role, content, created_at)."""
    with sqlite3.connect(transcripts_file(tmp_path)) as database:
        return database.execute(
            "SELECT session_id, role, content, created_at FROM message ORDER BY id"
        ).fetchall()


def import_json(run_nerve: RunNerve, tmp_path: Path, source: str, **kwargs: str) -> dict:
    """Run ``nerve memory import SOURCE --json``; it must succeed. Its JSON report."""
    result = run_nerve("memory", "import", source, "--json", *places(tmp_path), **kwargs)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def loom_backend(tmp_path: Path) -> None:
    config = tmp_path / "cfg" / "config.local.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("memory:\n  backend: loom\n", encoding="utf-8")


class TestImportIsIdempotent:
    def test_importing_a_file_twice_stores_each_message_once(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the second run finds every message there and stores none."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", n) for n in range(3)])
        first = import_json(run_nerve, tmp_path, str(source))
        second = import_json(run_nerve, tmp_path, str(source))
        assert (first["new"], first["already_there"]) == (3, 0)
        assert (second["new"], second["already_there"]) == (0, 3)
        assert [row[2] for row in stored(tmp_path)] == [f"fact {n} of a" for n in range(3)]

    def test_a_file_that_grew_adds_only_its_new_lines(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: an export imported again after the conversation went on takes the rest."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", n) for n in range(2)])
        import_json(run_nerve, tmp_path, str(source))
        jsonl(source, [record("a", n) for n in range(5)])
        again = import_json(run_nerve, tmp_path, str(source))
        assert (again["new"], again["already_there"]) == (3, 2)
        assert len(stored(tmp_path)) == 5

    def test_a_record_s_own_id_is_its_key_and_the_first_version_stays(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: with an ``id``, a changed text is the same record, and never overwrites."""
        first = jsonl(tmp_path / "one.jsonl", [record("a", 0, id="m-1")])
        edited = jsonl(tmp_path / "two.jsonl", [record("a", 0, id="m-1", content="edited")])
        import_json(run_nerve, tmp_path, str(first))
        again = import_json(run_nerve, tmp_path, str(edited))
        assert (again["new"], again["already_there"]) == (0, 1)
        assert [row[2] for row in stored(tmp_path)] == ["fact 0 of a"]

    def test_two_ids_are_two_messages_even_with_the_same_text(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the id decides, so a user who says "ok" twice at one second keeps both."""
        same = {"content": "ok", "created_at": "2026-11-30T10:00:00Z"}
        source = jsonl(
            tmp_path / "in.jsonl", [record("a", 0, id=1, **same), record("a", 0, id=2, **same)]
        )
        report = import_json(run_nerve, tmp_path, str(source))
        assert (report["new"], report["already_there"]) == (2, 0)

    def test_an_integer_id_and_its_digits_as_text_are_one_record(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: an integer id is keyed as its decimal digits."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0, id=42), record("a", 1, id="42")])
        report = import_json(run_nerve, tmp_path, str(source))
        assert (report["new"], report["already_there"]) == (1, 1)

    def test_one_id_in_two_sessions_is_two_messages(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: an id is the record's within its session (exports number each from 1)."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0, id=1), record("b", 0, id=1)])
        report = import_json(run_nerve, tmp_path, str(source))
        assert (report["new"], report["already_there"], report["sessions"]) == (2, 0, 2)

    def test_a_line_repeated_in_one_file_is_already_there(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: a second identical line without an id is the same message, not a new one."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0), record("a", 0), record("a", 1)])
        report = import_json(run_nerve, tmp_path, str(source))
        assert (report["new"], report["already_there"]) == (2, 1)
        assert len(stored(tmp_path)) == 2

    def test_one_instant_written_three_ways_is_one_message_stored_in_utc(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the time is keyed as the instant it names, and stored as RFC 3339 UTC."""
        times = ("2026-11-30T10:00:00Z", "2026-11-30T10:00:00+00:00", "2026-11-30T12:00:00+02:00")
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0, created_at=t) for t in times])
        report = import_json(run_nerve, tmp_path, str(source))
        assert (report["new"], report["already_there"]) == (1, 2)
        assert stored(tmp_path) == [("a", "user", "fact 0 of a", "2026-11-30T10:00:00Z")]

    def test_a_change_in_any_of_the_four_fields_is_a_new_message(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: session, time, role and content all take part in the key."""
        base = record("a", 0)
        variants = [
            base,
            {**base, "session_id": "b"},
            {**base, "created_at": "2026-11-30T10:00:01+00:00"},
            {**base, "role": "assistant"},
            {**base, "content": "fact 0 of a."},
        ]
        report = import_json(run_nerve, tmp_path, str(jsonl(tmp_path / "in.jsonl", variants)))
        assert (report["new"], report["already_there"]) == (5, 0)


class TestWhatItSays:
    def test_the_line_counts_new_and_already_there_with_plurals(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """One message, one session: singular nouns; the path named is the database's."""
        loom_backend(tmp_path)
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0)])
        first = run_nerve("memory", "import", str(source), *places(tmp_path))
        second = run_nerve("memory", "import", str(source), *places(tmp_path))
        into = transcripts_file(tmp_path)
        assert (
            first.stdout == f"imported 1 new message (0 already there) of 1 session into {into}\n"
        )
        assert second.stdout == (
            f"imported 0 new messages (1 already there) of 1 session into {into}\n"
        )
        assert first.stderr == second.stderr == ""

    def test_json_keeps_imported_as_the_rows_this_run_stored(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """``imported`` meant the rows stored before; it still does, beside ``new``."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0), record("b", 1)])
        import_json(run_nerve, tmp_path, str(jsonl(tmp_path / "one.jsonl", [record("a", 0)])))
        report = import_json(run_nerve, tmp_path, str(source))
        assert report == {
            "imported": 1,
            "new": 1,
            "already_there": 1,
            "sessions": 2,
            "into": str(transcripts_file(tmp_path)),
        }


class TestStandardInput:
    def test_a_dash_reads_the_messages_from_standard_input(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """``-`` is standard input, imported like a file, twice reading as already there."""
        lines = "".join(json.dumps(record("a", n)) + "\n" for n in range(3))
        first = import_json(run_nerve, tmp_path, "-", input=lines)
        second = import_json(run_nerve, tmp_path, "-", input=lines)
        assert (first["new"], second["already_there"]) == (3, 3)
        assert len(stored(tmp_path)) == 3

    def test_a_bad_line_on_standard_input_is_named_by_its_number(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: the same one-line error as for a file, naming standard input."""
        lines = json.dumps(record("a", 0)) + "\n{broken\n"
        result = run_nerve("memory", "import", "-", *places(tmp_path), input=lines)
        assert_one_line_error(result, "standard input: 1 bad line", "line 2:", "not JSON at column")
        assert not transcripts_file(tmp_path).exists()

    def test_a_file_named_dash_is_reached_by_its_path(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """Only ``-`` as written means standard input; ``./-`` is the file."""
        jsonl(tmp_path / "-", [record("a", 0), record("a", 1)])
        report = import_json(run_nerve, tmp_path, "./-", input="")
        assert report["new"] == 2

    def test_empty_standard_input_imports_nothing_and_says_so(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        report = import_json(run_nerve, tmp_path, "-", input="")
        assert (report["new"], report["already_there"], report["sessions"]) == (0, 0, 0)

    def test_standard_input_past_its_bound_is_refused_whole(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A pipe that never ends stops at the bound: one line, exit 2, nothing imported.

        The bound is lowered to a few lines' worth here; the real one is a gigabyte.
        """
        lines = jsonl(tmp_path / "in.jsonl", [record("a", n) for n in range(20)])
        monkeypatch.setattr(memory_import, "STDIN_MAX_BYTES", 500)
        monkeypatch.setattr(memory_import, "STDIN_CHUNK_BYTES", 64)
        with lines.open(encoding="utf-8") as stdin:
            monkeypatch.setattr("sys.stdin", stdin)
            status = main(["memory", "import", "-", *places(tmp_path)])
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1
        assert "standard input: more than" in err and "nothing imported" in err
        assert not transcripts_file(tmp_path).exists()


class TestTimesNeedTheirZone:
    @pytest.mark.parametrize("when", ["2026-11-30T10:00:00", "2026-11-30 10:00", "2026-11-30"])
    def test_a_time_without_a_zone_is_refused_with_the_fix(
        self, run_nerve: RunNerve, tmp_path: Path, when: str
    ) -> None:
        """IMP-1: a zone-less time names no instant; the hint says what to add."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0), record("a", 1, created_at=when)])
        result = run_nerve("memory", "import", str(source), *places(tmp_path))
        assert_one_line_error(result, "line 2:", "created_at has no zone offset", "add Z", "+00:00")
        assert not transcripts_file(tmp_path).exists()

    def test_a_time_past_year_9999_in_utc_is_refused(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        source = jsonl(
            tmp_path / "in.jsonl", [record("a", 0, created_at="9999-12-31T23:00:00-05:00")]
        )
        result = run_nerve("memory", "import", str(source), *places(tmp_path))
        assert_one_line_error(result, "line 1:", "created_at falls outside")


class TestUnderMemu:
    def test_the_default_backend_imports_and_warns_that_nothing_sweeps(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """Under memU the messages go in, and one warning line says why they stay there."""
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0)])
        result = run_nerve("memory", "import", str(source), *places(tmp_path))
        assert result.returncode == 0
        assert result.stdout.startswith("imported 1 new message")
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "python -m provisioner: warning: memory.backend is memu"
        )
        assert "the default" in lines[0] and "memory.backend: loom" in lines[0]
        assert len(stored(tmp_path)) == 1

    def test_the_warning_names_the_file_that_chose_memu(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        config = tmp_path / "cfg" / "config.local.yaml"
        config.parent.mkdir(parents=True)
        config.write_text("memory:\n  backend: memu\n", encoding="utf-8")
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0)])
        result = run_nerve("memory", "import", str(source), "--json", *places(tmp_path))
        assert json.loads(result.stdout)["new"] == 1
        assert f"memory.backend is memu ({config})" in result.stderr

    def test_a_configuration_that_cannot_be_read_imports_nothing(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """The configuration is read before anything is stored, as the sweep reads it."""
        config = tmp_path / "cfg" / "config.local.yaml"
        config.parent.mkdir(parents=True)
        config.write_text("memory: [unclosed\n", encoding="utf-8")
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0)])
        result = run_nerve("memory", "import", str(source), *places(tmp_path))
        assert_one_line_error(result, "config.local.yaml")
        assert not transcripts_file(tmp_path).exists()


class TestAnOldTranscriptsFile:
    def old_file(self, tmp_path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
        path = transcripts_file(tmp_path)
        path.parent.mkdir(parents=True)
        with sqlite3.connect(path) as database:
            database.executescript(OLD_SCHEMA)
            database.executemany(
                "INSERT INTO message (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
                rows,
            )
        database.close()
        return path

    def test_its_messages_count_as_already_there_and_its_repeats_stay(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """IMP-1: an old file is migrated on first use; its rows are keyed, none deleted."""
        tea = ("a", "user", "tea with lemon", "2026-11-30T10:00:00+00:00")
        path = self.old_file(
            tmp_path, [tea, tea, ("a", "assistant", "noted", "2026-11-30T10:01:00Z")]
        )
        again = [
            record("a", 0, content="tea with lemon", created_at="2026-11-30T10:00:00Z"),
            record("a", 1, content="noted", created_at="2026-11-30T11:01:00+01:00"),
            record("a", 2),
        ]
        report = import_json(run_nerve, tmp_path, str(jsonl(tmp_path / "in.jsonl", again)))
        assert (report["new"], report["already_there"]) == (1, 2)
        assert [row[2] for row in stored(tmp_path)] == [
            "tea with lemon",
            "tea with lemon",
            "noted",
            "fact 2 of a",
        ]
        with sqlite3.connect(path) as database:
            assert database.execute("PRAGMA user_version").fetchone()[0] == TRANSCRIPTS_VERSION
        database.close()

    def test_a_file_of_a_newer_schema_is_refused_and_left_as_it_is(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        path = self.old_file(tmp_path, [])
        with sqlite3.connect(path) as database:
            database.execute(f"PRAGMA user_version = {TRANSCRIPTS_VERSION + 1}")
        database.close()
        source = jsonl(tmp_path / "in.jsonl", [record("a", 0)])
        result = run_nerve("memory", "import", str(source), *places(tmp_path))
        assert_one_line_error(result, str(path), "newer than this package's", "upgrade")
        with sqlite3.connect(path) as database:
            version = database.execute("PRAGMA user_version").fetchone()[0]
            columns = [row[1] for row in database.execute("PRAGMA table_info(message)")]
            rows = database.execute("SELECT COUNT(*) FROM message").fetchone()[0]
        database.close()
        assert (version, rows) == (TRANSCRIPTS_VERSION + 1, 0)
        assert "import_key" not in columns


@pytest.fixture(scope="module")
def processes() -> ForkServerContext:
    """Processes forked from a server that imported the package (and no pytest) once."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, "provisioner.cli.memory_import"])
    return context


def import_together(context: ForkServerContext, argv: list[str], output: Path) -> list[dict]:
    """Two ``nerve memory import`` processes released at one barrier; their JSON reports."""
    barrier = context.Barrier(2)
    runs = [
        context.Process(target=run_cli, args=(argv, f"{output}-{n}", {}, barrier)) for n in (1, 2)
    ]
    for process in runs:
        process.start()
    for process in runs:
        process.join(JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()
    reports = []
    for n, process in enumerate(runs, start=1):
        out, err = read_output(f"{output}-{n}")
        assert process.exitcode == 0, err
        reports.append(json.loads(out))
    return reports


class TestTwoImportsAtOnce:
    @pytest.mark.slow
    @pytest.mark.parametrize("start", ["no file yet", "an old file"])
    def test_two_imports_of_one_file_store_each_message_once(
        self, processes: ForkServerContext, tmp_path: Path, start: str
    ) -> None:
        """IMP-1: real processes, started together; one stores, the other finds it there."""
        records = [record(f"s{n % 7}", n) for n in range(RACE_MESSAGES)]
        source = jsonl(tmp_path / "in.jsonl", records)
        for round_number in range(RACE_ROUNDS):
            folder = tmp_path / f"round-{round_number}"
            database = folder / "transcripts.sqlite3"
            folder.mkdir()
            if start == "an old file":
                with sqlite3.connect(database) as old:
                    old.executescript(OLD_SCHEMA)
                old.close()
            argv = ["memory", "import", str(source), "--json", "--transcripts", str(database),
                    *places(folder)]  # fmt: skip
            reports = import_together(processes, argv, folder / "out")
            assert sum(r["new"] for r in reports) == RACE_MESSAGES
            assert all(r["new"] + r["already_there"] == RACE_MESSAGES for r in reports)
            with sqlite3.connect(database) as check:
                (count,) = check.execute("SELECT COUNT(*) FROM message").fetchone()
            check.close()
            assert count == RACE_MESSAGES
