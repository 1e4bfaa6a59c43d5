"""The folders as Nerve finds them (NERVE-7): its configuration folder by its own lookup, its
state folder ``$NERVE_HOME`` with ``nerve.db`` and ``memu.sqlite``.

Nerve's own ``nerve -c DIR init`` sets the machine up (its configuration files, its pointer
file), Nerve's own ``Database`` makes ``nerve.db``; the package then runs from another folder,
standalone and through Nerve's command, without naming either file.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost

nerve_db = pytest.importorskip("nerve.db", reason=NO_NERVE)

from nerve import config as nerve_config  # noqa: E402
from nerve import paths as nerve_paths  # noqa: E402

from provisioner.config.paths import (  # noqa: E402
    FROM_CWD,
    FROM_DEFAULT,
    FROM_ENV,
    FROM_FLAG,
    FROM_POINTER,
    default_paths,
    find_folders,
)
from testbed.memu_db import MemuDb  # noqa: E402


def nerve_init(run_host: RunHost, machine: Machine) -> None:
    """Nerve's own non-interactive init on the machine's configuration folder."""
    done = run_host("-c", str(machine.config_dir), "init", "--non-interactive", mounted=False)
    assert done.returncode == 0, done.stderr


def nerve_conversation(path: Path, texts: list[str]) -> None:
    """One session in a ``nerve.db`` that Nerve's ``Database`` makes and writes."""

    async def write() -> None:
        database = nerve_db.Database(path)
        await database.connect()
        try:
            await database.create_session("chat")
            for number, text in enumerate(texts):
                await database.add_message("chat", "user" if number % 2 == 0 else "assistant", text)
        finally:
            await database.close()

    asyncio.run(write())


@pytest.fixture
def nerve_machine(machine: Machine, run_host: RunHost) -> Machine:
    """A machine Nerve set up: its configuration, its pointer file and a nerve.db with three
    messages, in the default state folder (``~/.nerve``)."""
    nerve_init(run_host, machine)
    nerve_conversation(machine.state / "nerve.db", ["a question", "an answer", "thanks"])
    return machine


class TestTheLookupIsNerves:
    """The package's lookup gives the folder Nerve's own ``resolve_config_dir`` gives."""

    def test_after_nerves_init_the_pointer_file_names_the_folder_from_anywhere(
        self, nerve_machine: Machine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        elsewhere = nerve_machine.home / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        folders = find_folders()
        assert (folders.config_dir, folders.source) == (nerve_machine.config_dir, FROM_POINTER)
        assert nerve_config.resolve_config_dir() == (nerve_machine.config_dir, FROM_POINTER)
        assert folders.state_dir == nerve_paths.nerve_home() == nerve_machine.state
        assert folders.nerve

    def test_each_source_agrees_with_nerves(
        self, nerve_machine: Machine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        other = nerve_machine.home / "other"
        other.mkdir()
        flagged = find_folders(other)
        assert (flagged.config_dir, flagged.source) == nerve_config.resolve_config_dir(other)
        assert flagged.source == FROM_FLAG
        monkeypatch.setenv("NERVE_CONFIG_DIR", str(other))
        assert (find_folders().config_dir, FROM_ENV) == nerve_config.resolve_config_dir()
        monkeypatch.delenv("NERVE_CONFIG_DIR")
        monkeypatch.chdir(nerve_machine.config_dir)
        assert (find_folders().config_dir, FROM_CWD) == nerve_config.resolve_config_dir()

    def test_nerve_home_moves_the_state_folder_as_it_moves_nerves(
        self, machine: Machine, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        moved = machine.home / "state-elsewhere"
        monkeypatch.setenv("NERVE_HOME", str(moved))
        assert find_folders().state_dir == nerve_paths.nerve_home() == moved

    def test_without_any_nerve_configuration_the_packages_default_stays(
        self, machine: Machine
    ) -> None:
        folders = find_folders()
        assert (folders.config_dir, folders.source) == (machine.home / ".nerve", FROM_DEFAULT)
        assert not folders.nerve
        assert default_paths(folders.config_dir) == (
            machine.home / ".nerve" / "memory" / "transcripts.sqlite3",
            machine.home / ".nerve" / "memory" / "state.sqlite3",
        )

    def test_with_nerves_configuration_the_packages_state_is_in_nerves_state_folder(
        self, nerve_machine: Machine
    ) -> None:
        assert default_paths(nerve_machine.config_dir)[1] == (
            nerve_machine.state / "memory" / "state.sqlite3"
        )


class TestTheSweepReadsNervesDatabase:
    def test_the_plan_reads_nerve_db_without_being_told_where(
        self, nerve_machine: Machine, run_package: RunHost
    ) -> None:
        elsewhere = nerve_machine.home / "elsewhere"
        elsewhere.mkdir()
        done = run_package("memory", "sweep", "--plan", "--json", cwd=elsewhere)
        assert done.returncode == 0, done.stderr
        plan = json.loads(done.stdout)
        assert (plan["sessions"], plan["messages"]) == (1, 3)

    def test_the_packages_flag_still_wins(
        self, nerve_machine: Machine, run_package: RunHost
    ) -> None:
        other = nerve_machine.home / "other.db"
        nerve_conversation(other, ["only one"])
        done = run_package("memory", "sweep", "--plan", "--json", "--nerve-db", str(other))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["messages"] == 1

    def test_a_mounted_group_honours_nerves_c(
        self, nerve_machine: Machine, run_host: RunHost
    ) -> None:
        """``nerve -c DIR memory sweep`` reads DIR's configuration, not the pointer's: the
        pointer's (Nerve's init, memU) refuses a sweep; DIR's says Loom, so the sweep runs and
        finds no gateway to reach."""
        other = nerve_machine.home / "other-config"
        other.mkdir()
        (other / "config.yaml").write_text(
            "memory:\n  backend: loom\nmcp_gateway_url: http://127.0.0.1:9\n", encoding="utf-8"
        )
        refused = run_host("memory", "sweep", "--once")
        assert refused.returncode == 2
        assert "memory.backend is 'memu'" in refused.stderr
        swept = run_host("-c", str(other), "memory", "sweep", "--once", "--json")
        assert "memory.backend is 'memu'" not in swept.stderr
        assert swept.returncode == 75, swept.stderr  # memory could not be reached at all
        assert json.loads(swept.stdout.splitlines()[-1])["sessions_seen"] == 1


class TestTheMigrationFindsMemusStore:
    def test_the_dry_run_counts_memu_sqlite_in_the_state_folder(
        self, nerve_machine: Machine, run_package: RunHost
    ) -> None:
        MemuDb(nerve_machine.state / "memu.sqlite").add_items(4)
        done = run_package("memory", "migrate", "--dry-run", "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert (report["items_total"], report["source"]) == (
            4,
            str(nerve_machine.state / "memu.sqlite"),
        )
