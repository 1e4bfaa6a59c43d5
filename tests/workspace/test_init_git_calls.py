"""A render starts no ``git`` (INIT-4): Copier is run without programs to start.

Copier asks ``git`` whether the template folder is a repository or a bundle, and once per
written file for the destination's ``core.fileMode``; a render of the package's template into
a fresh folder needs none of it. A ``git`` placed first on ``PATH`` logs every call: ``nerve``
must leave the log empty, while ``copier copy`` of the same template, run with the same
``PATH``, shows that the logger would have caught a call.
"""

from __future__ import annotations

import gc
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from plumbum import CommandNotFound, local

from provisioner.workspace.render import Answers, _without_programs, render_workspace
from tests.support.processes import RunNerve, clean_environment
from tests.support.repo import REPO_ROOT

REAL_GIT = shutil.which("git")


def git_logger(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A folder holding a ``git`` that logs its arguments, and the environment putting it first."""
    folder, log = tmp_path / "logging-bin", tmp_path / "git-calls.log"
    folder.mkdir()
    script = folder / "git"
    then = f'exec "{REAL_GIT}" "$@"' if REAL_GIT else "exit 1"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\n{then}\n', encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}, log


def calls(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


class TestNoGitProcess:
    def test_init_into_a_new_folder_starts_no_git(self, run_nerve: RunNerve, tmp_path: Path):
        env, log = git_logger(tmp_path)
        result = run_nerve("init", "--non-interactive", "--workspace", "ws", env=env)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "ws" / "AGENTS.md").is_file()
        assert calls(log) == []

    def test_init_over_an_existing_workspace_starts_no_git(
        self, run_nerve: RunNerve, tmp_path: Path
    ):
        env, log = git_logger(tmp_path)
        assert run_nerve("init", "--workspace", "ws", env=env).returncode == 0
        (tmp_path / "ws" / "SOUL.md").write_text("mine\n", encoding="utf-8")
        result = run_nerve("init", "--workspace", "ws", "--memory-backend", "loom", env=env)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "ws" / "SOUL.md").read_text(encoding="utf-8") == "mine\n"
        assert calls(log) == []

    def test_render_and_the_golden_check_start_no_git(self, run_nerve: RunNerve, tmp_path: Path):
        env, log = git_logger(tmp_path)
        assert run_nerve("render", "--out", "out", env=env).returncode == 0
        check = run_nerve("golden", "check", env=env, cwd=REPO_ROOT)
        assert check.returncode in (0, 1), check.stderr  # 1: goldens drifted; still rendered
        assert calls(log) == []

    @pytest.mark.skipif(REAL_GIT is None, reason="needs git, to show what Copier starts")
    def test_the_logger_sees_what_copier_itself_starts(self, tmp_path: Path):
        """The control: the same logger on the same PATH records Copier's own git calls."""
        env, log = git_logger(tmp_path)
        home = tmp_path / "home"
        home.mkdir()
        command = [sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet"]
        result = subprocess.run(
            [*command, str(REPO_ROOT / "templates"), str(tmp_path / "dest")],
            capture_output=True,
            text=True,
            env=clean_environment(home, {**env, "PYTHONPATH": str(REPO_ROOT)}),
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert any("core.fileMode" in call for call in calls(log)), calls(log)


class TestProcessSettingsAfterARender:
    def test_the_collector_is_left_as_it_was(self, tmp_path: Path):
        """The render pauses cyclic garbage collection; it is on again afterwards, or off."""
        was_enabled = gc.isenabled()
        try:
            gc.enable()
            render_workspace(Answers(), tmp_path / "a")
            assert gc.isenabled()
            gc.disable()
            render_workspace(Answers(), tmp_path / "b")
            assert not gc.isenabled()
        finally:
            if was_enabled:
                gc.enable()

    def test_programs_are_hidden_from_copier_only_while_it_renders(self):
        path_before = os.environ.get("PATH")
        seen: list[bool] = []

        def render() -> None:
            try:
                local.which("git")
                seen.append(True)
            except CommandNotFound:
                seen.append(False)

        _without_programs(render)
        assert seen == [False]
        assert os.environ.get("PATH") == path_before
        if REAL_GIT:
            assert local.which("git")

    def test_a_copier_that_needs_git_renders_again_with_the_path_as_it_was(self):
        """An older Copier fails without git (CommandNotFound): the render is run once more."""
        attempts: list[str] = []

        def render() -> None:
            attempts.append(str(local.env.get("PATH", "")))
            if len(attempts) == 1:
                raise CommandNotFound("git", [])

        _without_programs(render)
        assert attempts[0] == os.devnull
        assert attempts[1] == local.env.get("PATH", "") != os.devnull
