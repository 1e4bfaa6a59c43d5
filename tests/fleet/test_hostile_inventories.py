"""REL-13: an inventory from anyone is read at a bounded cost, every bad value in it is one line
naming the entry with exit status 2, and a workspace path must name a workspace.

The costly inputs (an alias bomb, a FIFO) run in a real process with a timeout, so a reader
that hangs on them fails the test instead of hanging the suite.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.fleet.run import FDS_KEPT, FDS_PER_JOB
from tests.fleet.provisioning import Provision, Ran, run_main
from tests.support.processes import assert_one_line_error, clean_environment
from tests.support.repo import REPO_ROOT

HANG_BOUND_S = 60  # REL-13: far beyond what a bounded read takes; only a hang reaches it


def fleet(*args: str) -> Ran:
    return run_main(["fleet", *args])


def one_line(ran: Ran) -> str:
    """The run's one error line; exit 2 and no traceback are asserted on the way."""
    assert ran.status == 2, (ran.status, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    [line] = ran.stderr.splitlines()
    return line


def fleet_process(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m provisioner fleet …`` in a real process, killed past ``HANG_BOUND_S``."""
    (tmp_path / "home").mkdir(exist_ok=True)
    env = clean_environment(tmp_path / "home", {"PYTHONPATH": str(REPO_ROOT)})
    return subprocess.run(
        [sys.executable, "-m", "provisioner", "fleet", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_BOUND_S,
    )


def alias_bomb() -> str:
    """A one-entry inventory whose ``memory_backend`` is nine levels of nine aliases each:
    a few hundred bytes standing for 9**9 strings."""
    levels = "abcdefghi"
    parts = ["&a [" + ", ".join(["lol"] * 9) + "]"]
    for previous, current in itertools.pairwise(levels):
        parts.append(f"&{current} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "- {workspace: ws, config_dir: cfg, memory_backend: [" + ", ".join(parts) + "]}\n"


class TestBoundedReading:
    def test_an_alias_bomb_is_refused_at_once(self, tmp_path: Path) -> None:
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text(alias_bomb())
        assert len(inventory.read_bytes()) < 600
        ran = fleet_process(tmp_path, "check", "--inventory", str(inventory))
        assert_one_line_error(ran, str(inventory), "expands to more than", status=2)

    def test_a_fifo_is_refused_not_read(self, tmp_path: Path) -> None:
        inventory = tmp_path / "fleet.yaml"
        os.mkfifo(inventory)
        ran = fleet_process(tmp_path, "check", "--inventory", str(inventory))
        assert_one_line_error(ran, str(inventory), "is not a regular file", status=2)

    def test_a_device_is_refused_not_read(self) -> None:
        line = one_line(fleet("check", "--inventory", os.devnull))
        assert f"{os.devnull}: is not a regular file; expected a YAML or JSON list" in line

    @pytest.mark.parametrize("given", [".", "folder"])
    def test_a_folder_given_as_the_inventory_is_one_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
    ) -> None:
        (tmp_path / "folder").mkdir()
        monkeypatch.chdir(tmp_path)
        line = one_line(fleet("check", "--inventory", given))
        assert f"{given}: is a folder; expected a YAML or JSON list" in line

    @pytest.mark.parametrize(
        ("name", "text"),
        [
            ("fleet.yaml", "- " + "[" * 5000 + "]" * 5000 + "\n"),
            ("fleet.json", "[" * 100_000 + "]" * 100_000),
            ("fleet.json", "[" + "[" * 100 + "]" * 100 + "]"),
        ],
        ids=["yaml", "json-past-the-parser", "json-past-the-bound"],
    )
    def test_deep_nesting_is_one_line(self, tmp_path: Path, name: str, text: str) -> None:
        inventory = tmp_path / name
        inventory.write_text(text)
        line = one_line(fleet("check", "--inventory", str(inventory)))
        assert str(inventory) in line and "nesting deeper than 64 levels" in line


class TestBadValues:
    @pytest.mark.parametrize(
        ("document", "fragment"),
        [
            (
                [{"workspace": "w\u0000s", "config_dir": "cfg"}],
                "entry 1 ('w\\x00s'): workspace holds a NUL character",
            ),
            (
                [{"workspace": "ws", "config_dir": "c\ud800"}],
                "entry 1 (ws): config_dir holds a character the file system cannot encode",
            ),
            (
                [{"workspace": "ws", "config_dir": "cfg", "create": "yes"}],
                "entry 1 (ws): create 'yes' is not true or false",
            ),
        ],
    )
    def test_a_bad_path_or_flag_is_one_line_naming_the_entry(
        self, tmp_path: Path, document: list[dict[str, str]], fragment: str
    ) -> None:
        inventory = tmp_path / "fleet.json"
        inventory.write_text(json.dumps(document))  # ensure_ascii: the lone surrogate survives
        line = one_line(fleet("update", "--inventory", str(inventory)))
        assert fragment in line and str(inventory) in line

    @pytest.mark.parametrize(
        ("workspace", "named"),
        [
            ("/", "a filesystem root"),
            ("/etc", "the system folder /etc"),
            ("/usr/lib/nerve", "the system folder /usr/lib/nerve"),
            ("/home", "the system folder /home"),
            ("../" * 40, "a filesystem root"),
        ],
        ids=["root", "etc", "inside-usr", "home", "dotted-up-to-root"],
    )
    def test_a_root_or_system_folder_is_never_a_workspace(
        self, tmp_path: Path, workspace: str, named: str
    ) -> None:
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text(f"- {{workspace: '{workspace}', config_dir: cfg, create: true}}\n")
        line = one_line(fleet("check", "--inventory", str(inventory)))
        assert f"entry 1 ({workspace}): workspace is {named}, never a workspace" in line


class TestWorkspacesMustBeWorkspaces:
    def test_a_missing_workspace_is_an_error_not_a_stray_create_and_the_others_go_on(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        provision("ws")
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text(
            "- {workspace: wss, config_dir: cfg}\n- {workspace: ws, config_dir: cfg}\n"
        )
        ran = fleet("update", "--inventory", str(inventory), "--json")
        assert ran.status == 2
        misspelt, real = ran.json()["workspaces"]
        assert misspelt["status"] == "error" and "no such folder" in misspelt["error"]
        assert "create: true" in misspelt["error"]
        assert real["status"] == "up_to_date"
        assert not (tmp_path / "wss").exists()

    def test_create_true_provisions_a_new_workspace(self, tmp_path: Path) -> None:
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text("- {workspace: new/ws, config_dir: new/cfg, create: true}\n")
        ran = fleet("update", "--inventory", str(inventory), "--json")
        assert ran.status == 0, ran.stdout
        assert (tmp_path / "new" / "ws" / "AGENTS.md").is_file()
        assert ran.json()["changed"] == 1

    def test_a_non_empty_folder_holding_no_workspace_is_refused_even_with_create(
        self, tmp_path: Path
    ) -> None:
        project = tmp_path / "project"
        project.mkdir()
        (project / "notes.txt").write_text("mine\n")
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text("- {workspace: project, config_dir: cfg, create: true}\n")
        ran = fleet("update", "--inventory", str(inventory), "--json")
        assert ran.status == 2
        [workspace] = ran.json()["workspaces"]
        assert "holds files but no workspace" in workspace["error"]
        assert sorted(path.name for path in project.iterdir()) == ["notes.txt"]

    def test_a_missing_config_dir_is_an_error(self, tmp_path: Path, provision: Provision) -> None:
        provision("ws")
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text("- {workspace: ws, config_dir: cfgg}\n")
        ran = fleet("check", "--inventory", str(inventory), "--json")
        assert ran.status == 2
        [workspace] = ran.json()["workspaces"]
        assert workspace["error"].startswith(f"config_dir {tmp_path / 'cfgg'}: no such folder")

    def test_a_tilde_is_the_home_folder(
        self, tmp_path: Path, provision: Provision, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "home" / "cfg").mkdir(parents=True)
        provision("home/ws", "--config-dir", str(tmp_path / "home" / "cfg"))
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        inventory = elsewhere / "fleet.yaml"
        inventory.write_text("- {workspace: ~/ws, config_dir: ~/cfg}\n")
        ran = fleet("check", "--inventory", str(inventory), "--json")
        assert ran.status == 0, ran.stdout
        assert ran.json()["workspaces"][0]["workspace"] == "~/ws"


class TestJobs:
    def test_jobs_beyond_what_the_open_file_limit_allows_are_refused_naming_the_bound(
        self, tmp_path: Path
    ) -> None:
        """A real process with a soft limit of 256 descriptors: (256 - 64) / 16 = 12 jobs."""
        limit = 256
        allowed = (limit - FDS_KEPT) // FDS_PER_JOB
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text("- {workspace: ws, config_dir: cfg, create: true}\n")
        (tmp_path / "home").mkdir()
        env = clean_environment(tmp_path / "home", {"PYTHONPATH": str(REPO_ROOT)})

        def run(jobs: int) -> subprocess.CompletedProcess[str]:
            script = (
                "import resource, sys\n"
                "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
                f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, hard))\n"
                "from provisioner.cli.main import main\n"
                "sys.exit(main(sys.argv[1:], prog='nerve-provisioner'))\n"
            )
            return subprocess.run(
                [sys.executable, "-c", script, "fleet", "check", "--inventory", str(inventory),
                 "--jobs", str(jobs)],
                capture_output=True, text=True, env=env, timeout=HANG_BOUND_S,
            )  # fmt: skip

        refused = run(5000)
        assert_one_line_error(
            refused, f"--jobs: '5000': expected a whole number from 1 to {allowed}"
        )
        assert run(allowed).returncode == 1  # drift: the workspace would be created
        assert_one_line_error(run(allowed + 1), f"from 1 to {allowed}")
        assert_one_line_error(run(0), f"from 1 to {allowed}")
