"""``extend_cli`` mounts the package into a click group shaped like Nerve's (NERVE-1).

The group is the stub's (``stub_nerve/nervestub/cli.py``), built fresh for each test: a
``main`` group with ``--config-dir`` that loads the configuration into ``ctx.obj`` and an
``init`` with Nerve's flags that writes ``config.yaml`` and its own ``AGENTS.md``. Commands
run through click's ``CliRunner``; the package's init and its groups run for real.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest
from click.testing import CliRunner, Result

from provisioner.base.command import PACKAGE_GROUPS
from provisioner.integrations.nerve import extend_cli
from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

STUB_CLI = Path(__file__).parent / "stub_nerve" / "nervestub" / "cli.py"
MANIFEST = Path(".nerve") / "provisioned.json"


def _load_stub() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nervestub_cli_under_test", STUB_CLI)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STUB = _load_stub()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and current folder, without nerve's own variables in the environment."""
    home = tmp_path / "home"
    home.mkdir()
    wanted = clean_environment(home)
    for key in list(os.environ):
        if key not in wanted:
            monkeypatch.delenv(key)
    for key, value in wanted.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(home)
    return home


@pytest.fixture
def nerve_cli() -> click.Group:
    group = STUB.build_cli()
    extend_cli(group)
    return group


def invoke(group: click.Group, *args: str, input: str = "") -> Result:
    """``nerve args`` as Nerve's installed script runs it (its program name is ``nerve``)."""
    return CliRunner().invoke(
        group, list(args), input=input, catch_exceptions=False, prog_name="nerve"
    )


def manifest_answers(workspace: Path) -> dict:
    return json.loads((workspace / MANIFEST).read_text(encoding="utf-8"))["answers"]


class TestInitGainsTheMemoryBackend:
    def test_nerves_init_runs_first_then_the_workspace_is_worded_for_loom(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        workspace = home / "ws"
        monkeypatch.setenv("NERVE_WORKSPACE", str(workspace))
        result = invoke(
            nerve_cli,
            "-c",
            str(home / "cfg"),
            "init",
            "--non-interactive",
            "--memory-backend",
            "loom",
        )
        assert result.exit_code == 0, result.output
        nerve_line = result.stdout.index("stub-nerve init: configured Nerve")
        package_line = result.stdout.index(f"Workspace {workspace} (personal, worded for loom)")
        assert nerve_line < package_line
        assert (home / "cfg" / "config.yaml").is_file()
        assert manifest_answers(workspace)["memory_backend"] == "loom"
        assert "mcp__loom__loom_search" in (workspace / "TOOLS.md").read_text(encoding="utf-8")

    def test_a_file_nerves_step_wrote_in_this_run_is_reworded(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """NERVE-10: Nerve's own AGENTS.md, written a moment earlier in the same run, is its
        shipped text: the workspace ends worded for Loom, not with it kept as an edit."""
        workspace = home / "ws"
        monkeypatch.setenv("NERVE_WORKSPACE", str(workspace))
        result = invoke(nerve_cli, "init", "--non-interactive", "--memory-backend", "loom")
        assert result.exit_code == 0, result.output
        assert "re-worded  AGENTS.md" in result.stdout
        assert "mcp__loom__loom_search" in (workspace / "AGENTS.md").read_text(encoding="utf-8")

    def test_a_file_there_before_the_run_and_not_nerves_text_is_kept_and_listed(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A file Nerve's step did not write in this run, and that is no text Nerve's installed
        package ships, is the agent's: kept, and the summary says where it is."""
        workspace = home / "ws"
        monkeypatch.setenv("NERVE_WORKSPACE", str(workspace))
        first = invoke(nerve_cli, "init", "--non-interactive")
        assert first.exit_code == 0, first.output
        result = invoke(nerve_cli, "init", "--non-interactive", "--memory-backend", "loom")
        assert result.exit_code == 0, result.output
        assert (workspace / "AGENTS.md").read_text(encoding="utf-8") == STUB.OWN_AGENTS_MD
        assert "kept       AGENTS.md" in result.stdout

    def test_the_workspace_is_the_one_nerves_configuration_names(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Nerve's configured workspace wins over the package's own default and variable."""
        configured = home / "configured-ws"
        (home / "config.yaml").write_text(f"workspace: {configured}\n", encoding="utf-8")
        monkeypatch.setenv("NERVE_WORKSPACE", str(home / "elsewhere"))
        result = invoke(nerve_cli, "init", "--if-needed", "--memory-backend", "memu")
        assert result.exit_code == 0, result.output
        assert "stub-nerve init" not in result.stdout  # Nerve's step had nothing to do
        assert manifest_answers(configured)["memory_backend"] == "memu"
        assert not (home / "elsewhere").exists()

    def test_the_configuration_folder_is_nerves(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The package's init reads Nerve's folder: the backend it names there is used."""
        config_dir = home / "cfg"
        config_dir.mkdir()
        (config_dir / "config.yaml").write_text(f"workspace: {home / 'ws'}\n", encoding="utf-8")
        (config_dir / "config.local.yaml").write_text("memory:\n  backend: loom\n", "utf-8")
        monkeypatch.setenv("NERVE_CONFIG_DIR", str(home / "not-this-one"))
        result = invoke(
            nerve_cli, "-c", str(config_dir), "init", "--if-needed", "--memory-backend", "loom"
        )
        assert result.exit_code == 0, result.output
        assert str(config_dir / "config.local.yaml") in result.stdout

    def test_without_the_option_only_nerves_init_runs(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        workspace = home / "ws"
        monkeypatch.setenv("NERVE_WORKSPACE", str(workspace))
        result = invoke(nerve_cli, "init", "--non-interactive")
        assert result.exit_code == 0, result.output
        assert result.stdout == "stub-nerve init: configured Nerve (non_interactive=True)\n"
        assert not (workspace / MANIFEST).exists()

    def test_nerves_interactive_init_still_reads_its_answers(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The package's step asks nothing, so Nerve's questions get all of stdin."""
        monkeypatch.setenv("NERVE_WORKSPACE", str(home / "ws"))
        result = invoke(nerve_cli, "init", "--memory-backend", "loom", input="Orbit\n")
        assert result.exit_code == 0, result.output
        assert "stub-nerve init: configured Orbit (non_interactive=False)" in result.stdout
        assert manifest_answers(home / "ws")["memory_backend"] == "loom"

    def test_when_nerves_init_fails_the_package_does_not_run(
        self, home: Path, nerve_cli: click.Group, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("NERVE_WORKSPACE", str(home / "ws"))
        monkeypatch.setenv(STUB.INIT_FAILS_VARIABLE, "1")
        result = invoke(nerve_cli, "init", "--non-interactive", "--memory-backend", "loom")
        assert result.exit_code == 1
        assert "stub-nerve init: setup failed" in result.stderr
        assert not (home / "ws").exists()

    def test_a_backend_outside_the_registry_is_refused_before_nerves_init(
        self, home: Path, nerve_cli: click.Group
    ) -> None:
        result = invoke(nerve_cli, "init", "--non-interactive", "--memory-backend", "chroma")
        assert result.exit_code == 2
        assert "'chroma' is not one of 'memu', 'loom'" in result.stderr
        assert not (home / "config.yaml").exists()

    def test_a_failing_package_init_exits_with_its_status_and_one_line(
        self, home: Path, nerve_cli: click.Group
    ) -> None:
        """A workspace path that is a file: the package's one-line refusal, status 2."""
        not_a_folder = home / "a-file"
        not_a_folder.write_text("x", encoding="utf-8")
        (home / "config.yaml").write_text(f"workspace: {not_a_folder}\n", encoding="utf-8")
        result = invoke(nerve_cli, "init", "--if-needed", "--memory-backend", "loom")
        assert result.exit_code == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("nerve: error: "), result.stderr
        assert str(not_a_folder) in lines[0]

    def test_init_help_lists_the_option_beside_nerves_own(self, nerve_cli: click.Group) -> None:
        result = invoke(nerve_cli, "init", "--help")
        assert "--memory-backend [memu|loom]" in result.stdout
        assert "--non-interactive" in result.stdout and "--if-needed" in result.stdout


class TestThePackagesGroups:
    def test_every_group_is_mounted_beside_nerves_commands(self, nerve_cli: click.Group) -> None:
        listing = invoke(nerve_cli, "--help").stdout
        for name in (*PACKAGE_GROUPS, "init", "start", "status", "doctor"):
            assert f"\n  {name} " in listing, name

    def test_a_group_gets_every_argument_as_typed(self, nerve_cli: click.Group) -> None:
        """click parses none of them: not ``--``, not ``--help``."""
        arguments = ["--", "--help", "-x", "--golden-dir=a b"]
        ctx = nerve_cli.commands["golden"].make_context("golden", list(arguments))
        assert ctx.params == {"arguments": tuple(arguments)}

    def test_help_after_a_group_is_the_packages(self, nerve_cli: click.Group) -> None:
        result = invoke(nerve_cli, "memory", "--help")
        assert result.exit_code == 0
        assert result.stdout.startswith("usage: nerve memory")

    def test_a_render_through_nerve_writes_what_it_was_asked_for(
        self, home: Path, nerve_cli: click.Group
    ) -> None:
        out = home / "preview"
        result = invoke(
            nerve_cli, "render", "--backend", "loom", "--profile", "worker", "--out", str(out)
        )
        assert result.exit_code == 0, result.output
        answers = manifest_answers(out)
        assert (answers["memory_backend"], answers["profile"]) == ("loom", "worker")

    def test_bad_input_is_the_packages_one_line_with_status_2(
        self, home: Path, nerve_cli: click.Group
    ) -> None:
        result = invoke(nerve_cli, "render", "--profile", "nobody", "--out", str(home / "out"))
        assert result.exit_code == 2
        assert result.stderr.count("\n") == 1
        assert result.stderr.startswith("nerve: error: render: argument --profile: invalid choice")

    def test_the_groups_exit_status_is_the_packages(
        self, home: Path, nerve_cli: click.Group
    ) -> None:
        """``nerve golden check`` against an empty folder: differences, status 1."""
        (home / "empty").mkdir()
        result = invoke(nerve_cli, "golden", "check", "--golden-dir", str(home / "empty"), "--json")
        assert result.exit_code == 1
        assert json.loads(result.stdout)["ok"] is False


class TestNamesAlreadyTaken:
    def test_a_command_nerve_already_has_is_never_replaced(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        group = STUB.build_cli()

        @group.command("memory")
        def nerves_memory() -> None:
            click.echo("nerve's own memory command")

        mounted = extend_cli(group)
        assert group.commands["memory"] is nerves_memory
        assert "memory" not in mounted.commands
        assert set(mounted.commands) == set(PACKAGE_GROUPS) - {"memory"}
        assert len(mounted.skipped) == 1 and "nerve-provisioner memory" in mounted.skipped[0]
        message = capsys.readouterr().err
        assert message == f"nerve-provisioner: not mounted: {mounted.skipped[0]}\n"
        assert invoke(group, "memory").stdout == "nerve's own memory command\n"

    def test_an_init_with_its_own_memory_backend_option_is_left_alone(self) -> None:
        group = STUB.build_cli()
        init = group.commands["init"]
        init.params.append(click.Option(["--memory-backend"], default=None))
        callback = init.callback
        mounted = extend_cli(group)
        assert not mounted.init_option
        assert init.callback is callback
        assert [p.name for p in init.params].count("memory_backend") == 1
        assert "nerve-provisioner init --memory-backend" in mounted.skipped[0]

    def test_a_group_without_init_still_gets_the_packages_groups(self) -> None:
        group = STUB.build_cli()
        del group.commands["init"]
        mounted = extend_cli(group)
        assert not mounted.init_option
        assert set(mounted.commands) == set(PACKAGE_GROUPS)
        assert "no `init` command" in mounted.skipped[0]

    def test_mounting_twice_changes_nothing(self, capsys: pytest.CaptureFixture[str]) -> None:
        group = STUB.build_cli()
        extend_cli(group)
        commands = dict(group.commands)
        callback = group.commands["init"].callback
        again = extend_cli(group)
        assert again.commands == () and again.skipped == () and again.init_option
        assert group.commands == commands
        assert group.commands["init"].callback is callback
        assert capsys.readouterr().err == ""


class TestImportCost:
    def test_click_is_imported_only_when_extend_cli_is_asked_for(self, tmp_path: Path) -> None:
        code = (
            "import sys\n"
            "import provisioner.integrations.nerve as nerve\n"
            "print('click' in sys.modules)\n"
            "nerve.extend_cli\n"
            "print('click' in sys.modules)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=clean_environment(tmp_path, {"PYTHONPATH": str(REPO_ROOT)}),
            cwd=tmp_path,
            timeout=60,
        )
        assert result.stdout.split() == ["False", "True"], result.stderr

    def test_importing_the_host_api_loads_no_click_http_client_jinja_or_web_framework(
        self, tmp_path: Path
    ) -> None:
        """Each of the host API's names is imported on first use (docs/host-api.md)."""
        code = (
            "import json, sys\n"
            "import provisioner.integrations.nerve as nerve\n"
            "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
            "nerve.ProvisionerRuntimeError, nerve.StoreFault\n"
            "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=clean_environment(tmp_path, {"PYTHONPATH": str(REPO_ROOT)}),
            cwd=tmp_path,
            timeout=60,
        )
        heavy = {"click", "httpx", "httpcore", "jinja2", "copier", "starlette", "fastapi", "yaml"}
        imported, after_the_errors = (set(json.loads(line)) for line in result.stdout.splitlines())
        assert "provisioner" in imported, result.stderr
        assert not imported & heavy
        assert not after_the_errors & heavy
