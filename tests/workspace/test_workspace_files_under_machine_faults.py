"""init, render, golden and the configuration meet a full, read-only or failing disk with one
line naming the file and its cause, and the status a monitor acts on (REL-4): 75 for a full
disk (try again later), 73 for a file system that is read-only (or permission denied), 74 for
an I/O error — never 2 as if the input were bad, never a traceback.
"""

from __future__ import annotations

import errno
import io
import os
import pathlib
import shutil
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.config import loader, local_file
from provisioner.workspace import fs
from tests.support.machine_faults import fill, full_disk, open_below, read_only
from tests.support.repo import REPO_ROOT

EMBEDDINGS_KEY_ANSWERS = "\n\n\n\n\nsk-test-key\n"  # init --terminal's questions, the key last
DRIFTED_GOLDEN = Path("loom") / "personal" / "AGENTS.md"


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line on stderr (after any questions init asked there)."""
    err = capsys.readouterr().err
    assert err.count("nerve-provisioner: error: ") == 1 and "Traceback" not in err, err
    line = err[err.index("nerve-provisioner: error: ") :]
    assert line.count("\n") == 1 and line.endswith("\n"), err
    return line


def init(workspace: Path, config_dir: Path, *more: str) -> int:
    return main(["init", "--workspace", str(workspace), "--config-dir", str(config_dir), *more])


def failing(number: int, only: Path, real):  # type: ignore[no-untyped-def]
    """``real`` that raises ``OSError(number)`` (no file name, as a read or write through a
    descriptor does) for the path ``only``: an injected failing disk."""

    def call(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(path) == only:
            raise OSError(number, os.strerror(number))
        return real(path, *args, **kwargs)

    return call


class TestInit:
    def test_a_workspace_on_a_full_disk_is_75_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with full_disk(tmp_path / "disk") as disk:
            fill(disk)
            status = init(disk / "ws", tmp_path / "cfg", "--non-interactive")
            left_open = open_below(disk)
            lock_left = (disk / "ws" / ".nerve" / "init.lock").exists()
        line = one_line(capsys)
        assert status == 75
        assert f"{disk / 'ws'}" in line and "the disk is full" in line
        assert (left_open, lock_left) == ([], False)

    def test_a_full_configuration_folder_is_named_not_the_workspace(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The embeddings key goes to config.local.yaml; a full disk there names that file."""
        monkeypatch.setattr("sys.stdin", io.StringIO(EMBEDDINGS_KEY_ANSWERS))
        with full_disk(tmp_path / "cfg") as config_dir:
            fill(config_dir)
            status = init(tmp_path / "ws", config_dir, "--terminal", "--memory-backend", "memu")
        line = one_line(capsys)
        assert status == 75
        assert f"{config_dir / 'config.local.yaml'}: the disk is full" in line
        assert "workspace" not in line

    def test_a_configuration_folder_that_fails_a_write_is_named_not_the_workspace(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The same with an injected failing writer, for a run that cannot mount a tmpfs."""
        config_dir = tmp_path / "cfg"
        target = config_dir / "config.local.yaml"
        writer = failing(errno.ENOSPC, target, local_file.write_atomically)
        monkeypatch.setattr(local_file, "write_atomically", writer)
        monkeypatch.setattr("sys.stdin", io.StringIO(EMBEDDINGS_KEY_ANSWERS))
        status = init(tmp_path / "ws", config_dir, "--terminal", "--memory-backend", "memu")
        line = one_line(capsys)
        assert status == 75
        assert f"{target}: the disk is full" in line

    def test_a_read_only_workspace_is_73_naming_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        workspace = tmp_path / "ws"
        workspace.mkdir()
        with read_only(workspace) as kind:
            status = init(workspace, tmp_path / "cfg", "--non-interactive")
        line = one_line(capsys)
        assert status == 73
        cause = "the file system is read-only" if kind == "read_only" else "permission denied"
        assert str(workspace) in line and cause in line

    def test_a_configuration_file_the_disk_cannot_read_is_74_naming_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        config = config_dir / "config.yaml"
        config.write_text("memory:\n  backend: memu\n", encoding="utf-8")
        reader = failing(errno.EIO, config, loader.read_small_text)
        monkeypatch.setattr(loader, "read_small_text", reader)
        status = init(tmp_path / "ws", config_dir, "--non-interactive")
        line = one_line(capsys)
        assert status == 74
        assert f"{config}: the disk failed a read or a write" in line


class TestDoctor:
    def test_a_configuration_file_the_disk_cannot_read_is_a_check_naming_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Doctor reports what it finds: the configuration check fails (exit 1) and says why."""
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        config = config_dir / "config.yaml"
        config.write_text("memory:\n  backend: memu\n", encoding="utf-8")
        monkeypatch.setattr(
            loader, "read_small_text", failing(errno.EIO, config, loader.read_small_text)
        )
        folders = ["--workspace", str(tmp_path / "ws"), "--config-dir", str(config_dir)]
        status = main(["doctor", "--offline", *folders])
        out = capsys.readouterr().out
        assert status == 1
        assert f"config.load: the configuration cannot be read: {config}: the disk failed" in out


class _ReadsFail:
    """``os`` for the workspace's file access, whose reads of one file fail as a bad disk's do."""

    def __init__(self, failing: Path) -> None:
        self.failing = failing

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)

    def fdopen(self, fd: int, mode: str = "r", *args: object, **kwargs: object) -> object:
        handle = os.fdopen(fd, mode, *args, **kwargs)  # type: ignore[call-overload]
        if "r" in mode and os.readlink(f"/proc/self/fd/{fd}") == str(self.failing):
            handle.read = _eio
        return handle


def _eio(*_: object) -> bytes:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


class TestDiff:
    def test_a_workspace_file_the_disk_cannot_read_is_74_naming_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        workspace = tmp_path / "ws"
        assert init(workspace, tmp_path / "cfg", "--non-interactive") == 0
        capsys.readouterr()
        unreadable = (workspace / "AGENTS.md").resolve()
        monkeypatch.setattr(fs, "os", _ReadsFail(unreadable))
        status = main(["diff", "--workspace", str(workspace), "--config-dir", str(tmp_path)])
        line = one_line(capsys)
        assert status == 74
        assert f"{workspace / 'AGENTS.md'}: the disk failed a read or a write" in line


class TestRender:
    def test_a_render_onto_a_full_disk_is_75(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with full_disk(tmp_path / "disk") as disk:
            fill(disk)
            status = main(["render", "--out", str(disk / "out")])
        line = one_line(capsys)
        assert status == 75
        assert str(disk / "out") in line and "the disk is full" in line

    def test_a_render_into_a_read_only_folder_is_73(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        parent = tmp_path / "previews"
        parent.mkdir()
        with read_only(parent):
            status = main(["render", "--out", str(parent / "out")])
        line = one_line(capsys)
        assert status == 73
        assert str(parent / "out") in line


@pytest.fixture
def drifted_goldens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the goldens with one loom file changed, updated outside CI."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.chdir(REPO_ROOT)
    copy = tmp_path / "golden"
    shutil.copytree(REPO_ROOT / "golden", copy)
    with (copy / DRIFTED_GOLDEN).open("a", encoding="utf-8") as handle:
        handle.write("drift\n")
    return copy


class TestGolden:
    def test_an_update_into_a_read_only_golden_folder_is_73_naming_the_file(
        self, drifted_goldens: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with read_only(drifted_goldens):
            status = main(
                ["golden", "update", "--backend", "loom", "--golden-dir", str(drifted_goldens)]
            )
        line = one_line(capsys)
        assert status == 73
        assert str(drifted_goldens / DRIFTED_GOLDEN) in line

    def test_an_update_onto_a_full_disk_is_75_naming_the_file(
        self, drifted_goldens: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with full_disk(tmp_path / "disk") as disk:
            shutil.copytree(drifted_goldens / "loom", disk / "loom")
            fill(disk)
            status = main(["golden", "update", "--backend", "loom", "--golden-dir", str(disk)])
        line = one_line(capsys)
        assert status == 75
        assert f"{disk / DRIFTED_GOLDEN}: the disk is full" in line

    def test_a_golden_the_disk_cannot_read_is_74_naming_it(
        self,
        drifted_goldens: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        unreadable = drifted_goldens / DRIFTED_GOLDEN
        reader = failing(errno.EIO, unreadable, pathlib.Path.read_bytes)
        monkeypatch.setattr(pathlib.Path, "read_bytes", reader)
        status = main(["golden", "check", "--golden-dir", str(drifted_goldens)])
        line = one_line(capsys)
        assert status == 74
        assert f"{unreadable}: the disk failed a read or a write" in line
