"""Folders as Nerve finds them (NERVE-7), held to the lookup Nerve documents in its source:
``--config-dir``, ``NERVE_CONFIG_DIR``, the current folder with a configuration file, the
folder Nerve's pointer file names; the state folder ``$NERVE_HOME``, else ``~/.nerve``.
The integration suite (tests/nerve_host) checks the same against Nerve's own code."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.config.paths import (
    FROM_CWD,
    FROM_DEFAULT,
    FROM_ENV,
    FROM_FLAG,
    FROM_POINTER,
    default_paths,
    find_folders,
    found_memu_db,
    found_nerve_db,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("NERVE_HOME", "NERVE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(home)
    return home


def configured(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text("agent: {}\n", encoding="utf-8")
    return folder


class TestTheLookup:
    def test_nothing_anywhere_is_the_packages_default(self, home: Path) -> None:
        found = find_folders()
        assert (found.config_dir, found.source, found.state_dir) == (
            home / ".nerve",
            FROM_DEFAULT,
            home / ".nerve",
        )
        assert not found.nerve

    def test_the_flag_then_the_variable_then_the_current_folder_then_the_pointer(
        self, home: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pointed = configured(home / "pointed")
        (home / ".nerve").mkdir()
        (home / ".nerve" / "config_dir").write_text(f"{pointed}\n", encoding="utf-8")
        assert (find_folders().config_dir, find_folders().source) == (pointed, FROM_POINTER)
        here = configured(home / "here")
        monkeypatch.chdir(here)
        assert (find_folders().config_dir, find_folders().source) == (here, FROM_CWD)
        monkeypatch.setenv("NERVE_CONFIG_DIR", str(home / "named"))
        assert (find_folders().config_dir, find_folders().source) == (home / "named", FROM_ENV)
        flagged = find_folders(home / "flag")
        assert (flagged.config_dir, flagged.source) == (home / "flag", FROM_FLAG)

    def test_a_pointer_to_a_folder_without_configuration_is_passed_by(self, home: Path) -> None:
        (home / "empty").mkdir()
        (home / ".nerve").mkdir()
        (home / ".nerve" / "config_dir").write_text(str(home / "empty"), encoding="utf-8")
        assert find_folders().source == FROM_DEFAULT

    def test_nerve_home_moves_the_state_folder_made_absolute(
        self, home: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("NERVE_HOME", "relative-state")
        assert find_folders().state_dir == home / "relative-state"


class TestWithANerveConfiguration:
    def test_the_databases_and_nerves_files_are_in_the_state_folder(self, home: Path) -> None:
        config_dir = configured(home / "cfg")
        assert found_nerve_db(config_dir) is None and found_memu_db(config_dir) is None
        assert default_paths(config_dir)[1] == config_dir / "memory" / "state.sqlite3"
        (home / ".nerve").mkdir()
        (home / ".nerve" / "nerve.db").write_bytes(b"")
        assert found_nerve_db(config_dir) == home / ".nerve" / "nerve.db"
        assert found_memu_db(config_dir) == home / ".nerve" / "memu.sqlite"
        assert default_paths(config_dir) == (
            home / ".nerve" / "memory" / "transcripts.sqlite3",
            home / ".nerve" / "memory" / "state.sqlite3",
        )
