"""The package's command beside Nerve's: it installs no ``nerve`` (NERVE-1).

The install tests build two wheels once — this checkout and a stand-in distribution named
``nerve`` (``stub_nerve/``: a click group with init/start/status/doctor, each printing
``stub-nerve …`` and exiting with a status of its own) — and install them into fresh virtual
environments, one ``pip install`` after the other, as an operator would. Every command runs as
a real process through the environment's own ``bin/nerve`` and ``bin/nerve-provisioner``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.base.command import MODULE_COMMAND, PACKAGE_SCRIPT, invoked_as
from tests.support.processes import assert_one_line_error, clean_environment
from tests.support.repo import REPO_ROOT

STUB_SOURCE = Path(__file__).parent / "stub_nerve"
STUB_ADOPTS = {"STUB_NERVE_ADOPTS_PROVISIONER": "1"}  # the stub calls extend_cli(main)
PIP_QUIET = ["--quiet", "--disable-pip-version-check"]

# What the stub's commands print and the status each exits with (see stub_nerve/nervestub/cli.py).
NERVE_COMMANDS = {
    ("start", "-f"): ("stub-nerve start: started (foreground=True)", 0),
    ("status",): ("stub-nerve status: not running (follow=False)", 3),
    ("status", "--follow"): ("stub-nerve status: not running (follow=True)", 3),
    ("doctor",): ("stub-nerve doctor: [ERR] config dir", 1),
    ("init", "--non-interactive"): ("stub-nerve init: configured Nerve (non_interactive=True)", 0),
}


@dataclass(frozen=True)
class Wheels:
    package: Path
    nerve: Path


@dataclass(frozen=True)
class Venv:
    """A virtual environment with wheels installed into it, in the order given."""

    root: Path

    def script(self, name: str) -> Path:
        return self.root / "bin" / name

    def run(
        self,
        script: str,
        *args: str,
        home: Path,
        input: str = "",
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        """Run ``bin/<script> args`` in ``home`` (also HOME), without nerve's variables."""
        home.mkdir(parents=True, exist_ok=True)
        return subprocess.run(
            [str(self.script(script)), *args],
            input=input,
            capture_output=True,
            text=True,
            env=clean_environment(home, {"COLUMNS": "100", **(env or {})}),
            cwd=home,
            timeout=120,
        )


def _pip(python: Path | str, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", *args, *PIP_QUIET], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """This checkout and the stub, each built once into a wheel."""
    out = tmp_path_factory.mktemp("wheels")
    for source in (REPO_ROOT, STUB_SOURCE):
        _pip(
            sys.executable,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(source),
        )
    return Wheels(
        package=next(out.glob("nerve_provisioner-*.whl")), nerve=next(out.glob("nerve-*.whl"))
    )


def make_venv(root: Path, *wheels_in_order: Path) -> Venv:
    """A venv seeing the system's packages, each wheel installed into it by its own pip run.

    ``--ignore-installed`` puts the wheel into the venv even when the system already has a
    distribution of that name, so the venv runs this checkout and this stub, nothing else.
    """
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)],
        check=True,
        timeout=120,
    )
    python = root / "bin" / "python"
    for wheel in wheels_in_order:
        _pip(python, "install", "--no-deps", "--no-index", "--ignore-installed", str(wheel))
    where = subprocess.run(
        [str(python), "-c", "import provisioner; print(provisioner.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    assert Path(where.stdout.strip()).is_relative_to(root), where.stdout
    return Venv(root)


@pytest.fixture(scope="module")
def nerve_first(tmp_path_factory: pytest.TempPathFactory, wheels: Wheels) -> Venv:
    """Nerve installed, then the package."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheels.nerve, wheels.package)


@pytest.fixture(scope="module")
def nerve_after(tmp_path_factory: pytest.TempPathFactory, wheels: Wheels) -> Venv:
    """The package installed, then Nerve."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheels.package, wheels.nerve)


@pytest.fixture(scope="module")
def without_nerve(tmp_path_factory: pytest.TempPathFactory, wheels: Wheels) -> Venv:
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheels.package)


@pytest.fixture(scope="module", params=["nerve installed first", "nerve installed after"])
def either_order(request: pytest.FixtureRequest) -> Iterator[Venv]:
    yield request.getfixturevalue("nerve_first" if "first" in request.param else "nerve_after")


def _mounted_answer(
    venv: Venv, args: tuple[str, ...], home: Path
) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``nerve args`` through a Nerve that mounted the package, and ``nerve-provisioner args``."""
    through_nerve = venv.run("nerve", *args, home=home / "a", env=STUB_ADOPTS)
    direct = venv.run("nerve-provisioner", *args, home=home / "b")
    return through_nerve, direct


# Nerve's command function called directly, as Nerve's own script calls it.
NERVE_DIRECTLY = (
    "import sys; sys.argv[0] = 'nerve'; from nervestub.cli import main; sys.exit(main())"
)


def _nerves_own_answer(
    venv: Venv, args: tuple[str, ...], home: Path, input: str = ""
) -> subprocess.CompletedProcess:
    """``nerve args`` through ``bin/nerve``, asserted to answer as Nerve's function does.

    Status, stdout and stderr must be those of calling Nerve's function itself (in a folder
    of its own, so both start from the same state; the folder's name is not compared).
    """
    through_script = venv.run("nerve", *args, home=home / "script", input=input)
    direct = venv.run("python", "-c", NERVE_DIRECTLY, *args, home=home / "direct", input=input)
    assert _seen(through_script, home / "script") == _seen(direct, home / "direct")
    return through_script


def _seen(done: subprocess.CompletedProcess, home: Path) -> tuple[int, str, str]:
    """Status, stdout and stderr, with the run's own folder written as HOME."""
    return done.returncode, *(
        text.replace(str(home), "HOME") for text in (done.stdout, done.stderr)
    )


@pytest.mark.slow
class TestNerveCommandsInEitherInstallOrder:
    """NERVE-1: whichever is installed last, ``bin/nerve`` is Nerve's and only Nerve's."""

    def test_nerves_script_is_left_as_nerve_wrote_it(self, either_order: Venv) -> None:
        text = either_order.script("nerve").read_text(encoding="utf-8")
        assert "from nervestub.cli import main" in text
        assert "provisioner" not in text

    @pytest.mark.parametrize("args", list(NERVE_COMMANDS), ids=" ".join)
    def test_each_nerve_command_prints_nerves_answer_with_nerves_exit_status(
        self, either_order: Venv, tmp_path: Path, args: tuple[str, ...]
    ) -> None:
        expected_line, expected_status = NERVE_COMMANDS[args]
        result = _nerves_own_answer(either_order, args, tmp_path)
        assert result.returncode == expected_status, result.stderr
        assert result.stdout.startswith(expected_line), result.stdout

    def test_nerves_interactive_init_reads_its_stdin(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        result = _nerves_own_answer(either_order, ("init",), tmp_path, input="Orbit\n")
        assert result.returncode == 0, result.stderr
        assert "stub-nerve init: configured Orbit (non_interactive=False)" in result.stdout

    def test_nerve_provisioner_is_the_packages_cli_named_as_invoked(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        result = either_order.run("nerve-provisioner", "init", "--help", home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: nerve-provisioner init")
        assert "--memory-backend {memu,loom}" in result.stdout

    def test_a_nerve_that_mounted_the_package_runs_its_groups_under_its_own_name(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        through_nerve, direct = _mounted_answer(either_order, ("golden", "--help"), tmp_path)
        assert through_nerve.returncode == direct.returncode == 0
        assert through_nerve.stdout.startswith("usage: nerve golden")
        assert through_nerve.stdout == direct.stdout.replace(
            "usage: nerve-provisioner golden", "usage: nerve golden"
        )

    def test_a_nerve_that_did_not_mount_it_does_not_know_the_packages_groups(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        result = either_order.run("nerve", "golden", "check", home=tmp_path)
        assert result.returncode == 2
        assert "No such command 'golden'" in result.stderr


@pytest.mark.slow
class TestUninstallingEither:
    """NERVE-1: uninstalling one distribution leaves the other's command in place."""

    def test_uninstalling_the_package_leaves_nerves_command_working(
        self, tmp_path: Path, wheels: Wheels
    ) -> None:
        venv = make_venv(tmp_path / "v", wheels.nerve, wheels.package)
        _pip(venv.root / "bin" / "python", "uninstall", "--yes", "nerve-provisioner")
        assert not venv.script("nerve-provisioner").exists()
        result = venv.run("nerve", "status", home=tmp_path / "home")
        assert (result.returncode, result.stdout) == (
            3,
            "stub-nerve status: not running (follow=False)\n",
        )

    def test_uninstalling_nerve_leaves_nerve_provisioner_working(
        self, tmp_path: Path, wheels: Wheels
    ) -> None:
        venv = make_venv(tmp_path / "v", wheels.package, wheels.nerve)
        _pip(venv.root / "bin" / "python", "uninstall", "--yes", "nerve")
        assert not venv.script("nerve").exists()
        result = venv.run("nerve-provisioner", "--version", home=tmp_path / "home")
        assert (result.returncode, result.stdout) == (0, "nerve-provisioner 0.1.0\n")


@pytest.mark.slow
class TestMountedIntoNerve:
    """Through ``extend_cli`` the package's groups answer under Nerve's ``nerve``."""

    def test_golden_check_answers_as_nerve_provisioner_does(
        self, nerve_after: Venv, tmp_path: Path
    ) -> None:
        empty = tmp_path / "empty-golden"
        empty.mkdir()
        args = ("golden", "check", "--golden-dir", str(empty), "--json")
        through_nerve, direct = _mounted_answer(nerve_after, args, tmp_path)
        assert through_nerve.returncode == direct.returncode == 1
        mounted, standalone = json.loads(through_nerve.stdout), json.loads(direct.stdout)
        # NERVE-1: the accept command names the command as it was invoked, and only that differs
        assert mounted.pop("accept_command").startswith("nerve golden update ")
        assert standalone.pop("accept_command").startswith("nerve-provisioner golden update ")
        assert mounted == standalone

    @pytest.mark.parametrize(
        "args", [("render", "--help"), ("memory", "--help"), ("diff", "--help"), ("dev", "--help")]
    )
    def test_each_group_names_nerve_in_its_usage(
        self, nerve_first: Venv, tmp_path: Path, args: tuple[str, ...]
    ) -> None:
        through_nerve, direct = _mounted_answer(nerve_first, args, tmp_path)
        assert through_nerve.returncode == direct.returncode == 0
        assert through_nerve.stdout.startswith(f"usage: nerve {args[0]}")
        assert direct.stdout.startswith(f"usage: nerve-provisioner {args[0]}")

    def test_a_render_through_nerve_writes_what_it_was_asked_for(
        self, nerve_first: Venv, tmp_path: Path
    ) -> None:
        out = tmp_path / "preview"
        args = ("render", "--backend", "loom", "--profile", "worker", "--out", str(out))
        result = nerve_first.run("nerve", *args, home=tmp_path, env=STUB_ADOPTS)
        assert result.returncode == 0, result.stderr
        assert result.stdout.endswith(f"(loom) into {out}\n")
        manifest = json.loads((out / ".nerve" / "provisioned.json").read_text(encoding="utf-8"))
        assert manifest["answers"]["memory_backend"] == "loom"
        assert manifest["answers"]["profile"] == "worker"

    def test_bad_input_to_a_mounted_group_is_one_line_naming_nerve_and_status_2(
        self, nerve_first: Venv, tmp_path: Path
    ) -> None:
        args = ("render", "--profile", "nobody", "--out", str(tmp_path / "out"))
        result = nerve_first.run("nerve", *args, home=tmp_path, env=STUB_ADOPTS)
        assert_one_line_error(result, "nerve: error: render", "--profile", "nobody")


@pytest.mark.slow
class TestWithoutNerve:
    """No distribution named ``nerve``: there is no ``nerve`` command; the package's is
    ``nerve-provisioner``, as the README says."""

    def test_there_is_no_nerve_script(self, without_nerve: Venv) -> None:
        assert not without_nerve.script("nerve").exists()
        assert without_nerve.script("nerve-provisioner").is_file()

    def test_the_version_and_usage_name_nerve_provisioner(
        self, without_nerve: Venv, tmp_path: Path
    ) -> None:
        version = without_nerve.run("nerve-provisioner", "--version", home=tmp_path)
        assert version.stdout == "nerve-provisioner 0.1.0\n"
        bare = without_nerve.run("nerve-provisioner", home=tmp_path)
        assert bare.returncode == 2
        assert bare.stderr.startswith("usage: nerve-provisioner ")

    def test_init_provisions_the_workspace(self, without_nerve: Venv, tmp_path: Path) -> None:
        result = without_nerve.run("nerve-provisioner", "init", "--non-interactive", home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "nerve-workspace" / "AGENTS.md").is_file()
        assert "stub-nerve" not in result.stdout


class TestTheCommandsName:
    """NERVE-1: usage lines, errors and hints name the command as it was invoked."""

    @pytest.mark.parametrize(
        ("argv0", "name"),
        [
            ("/venv/bin/nerve-provisioner", PACKAGE_SCRIPT),
            ("/src/provisioner/__main__.py", MODULE_COMMAND),
            ("/venv/bin/pytest", PACKAGE_SCRIPT),
            ("/elsewhere/__main__.py", PACKAGE_SCRIPT),
            ("", PACKAGE_SCRIPT),
            (None, PACKAGE_SCRIPT),
        ],
    )
    def test_the_name_follows_argv0(self, argv0: str | None, name: str) -> None:
        assert invoked_as(argv0) == name

    def test_python_m_provisioner_names_itself_so(self, tmp_path: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "provisioner", "render", "--profile", "nobody"],
            capture_output=True,
            text=True,
            env=clean_environment(tmp_path),
            cwd=tmp_path,
            timeout=60,
        )
        assert_one_line_error(done, "python -m provisioner: error: render: ")

    def test_the_package_declares_no_nerve_script(self) -> None:
        import tomllib

        declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
        assert declared["project"]["scripts"] == {"nerve-provisioner": "provisioner.cli.main:main"}
