"""The ``nerve`` command next to Nerve's: no Nerve command lost, in either install order.

The install-order tests build two wheels once — this checkout and a stand-in distribution
named ``nerve`` (``stub_nerve/``: a click group with init/start/status/doctor, each printing
``stub-nerve …`` and exiting with a status of its own) — and install them into fresh
virtual environments, one ``pip install`` after the other, as an operator would. Every
command runs as a real process through the environment's own ``bin/nerve`` and
``bin/nerve-provisioner`` scripts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.cli.entry import PACKAGE_GROUPS, runs_package_cli
from tests.conftest import REPO_ROOT, assert_one_line_error, clean_environment

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
    """Nerve installed, then the package: the package's script is ``bin/nerve``."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheels.nerve, wheels.package)


@pytest.fixture(scope="module")
def nerve_after(tmp_path_factory: pytest.TempPathFactory, wheels: Wheels) -> Venv:
    """The package installed, then Nerve: Nerve's script is ``bin/nerve``."""
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheels.package, wheels.nerve)


@pytest.fixture(scope="module")
def without_nerve(tmp_path_factory: pytest.TempPathFactory, wheels: Wheels) -> Venv:
    return make_venv(tmp_path_factory.mktemp("venv") / "v", wheels.package)


@pytest.fixture(scope="module", params=["nerve installed first", "nerve installed after"])
def either_order(request: pytest.FixtureRequest) -> Iterator[Venv]:
    yield request.getfixturevalue("nerve_first" if "first" in request.param else "nerve_after")


def _same_answer(
    venv: Venv, args: tuple[str, ...], home: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``nerve args``, asserted to answer exactly as ``nerve-provisioner args`` does."""
    through_nerve = venv.run("nerve", *args, home=home / "a", env=env)
    direct = venv.run("nerve-provisioner", *args, home=home / "b")
    assert (through_nerve.returncode, through_nerve.stdout, through_nerve.stderr) == (
        direct.returncode,
        direct.stdout,
        direct.stderr,
    )
    return through_nerve


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
    """NERVE-1: whichever is installed last, every Nerve command is Nerve's."""

    @pytest.mark.parametrize("args", list(NERVE_COMMANDS), ids=" ".join)
    def test_each_nerve_command_prints_nerves_answer_with_nerves_exit_status(
        self, either_order: Venv, tmp_path: Path, args: tuple[str, ...]
    ) -> None:
        expected_line, expected_status = NERVE_COMMANDS[args]
        result = _nerves_own_answer(either_order, args, tmp_path)
        assert result.returncode == expected_status, result.stderr
        assert result.stdout.startswith(expected_line), result.stdout

    def test_nerves_streams_stay_apart(self, either_order: Venv, tmp_path: Path) -> None:
        result = _nerves_own_answer(either_order, ("start",), tmp_path)
        assert result.stdout == "stub-nerve start: started (foreground=False)\n"
        assert result.stderr == "stub-nerve: starting\n"

    def test_nerves_interactive_init_reads_the_same_stdin(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        result = _nerves_own_answer(either_order, ("init",), tmp_path, input="Orbit\n")
        assert result.returncode == 0, result.stderr
        assert "stub-nerve init: configured Orbit (non_interactive=False)" in result.stdout
        assert (tmp_path / "script" / "config.yaml").is_file()

    @pytest.mark.parametrize("args", [("--help",), ()], ids=["--help", "no command"])
    def test_the_help_is_nerves(
        self, either_order: Venv, tmp_path: Path, args: tuple[str, ...]
    ) -> None:
        result = _nerves_own_answer(either_order, args, tmp_path)
        shown = result.stdout + result.stderr  # click prints the bare group's help on stderr
        assert "Stub Nerve — a stand-in for the real one." in shown
        assert "golden" not in shown  # the package's groups are not Nerve's

    def test_nerve_provisioner_is_the_packages_cli(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        result = either_order.run("nerve-provisioner", "init", "--help", home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: nerve init")
        assert "--memory-backend {memu,loom}" in result.stdout

    def test_a_nerve_that_mounted_the_package_runs_its_groups(
        self, either_order: Venv, tmp_path: Path
    ) -> None:
        """Whoever wrote ``bin/nerve``, a Nerve with ``extend_cli`` answers ``nerve golden``."""
        result = _same_answer(either_order, ("golden", "--help"), tmp_path, env=STUB_ADOPTS)
        assert result.stdout.startswith("usage: nerve golden")


@pytest.mark.slow
class TestNerveInstalledBeforeThePackage:
    """The package's script is ``bin/nerve``; it hands Nerve's commands over, keeps its groups."""

    def test_the_nerve_script_is_the_packages_entry(self, nerve_first: Venv) -> None:
        text = nerve_first.script("nerve").read_text(encoding="utf-8")
        assert "from provisioner.cli.entry import main" in text

    def test_golden_check_is_the_packages(self, nerve_first: Venv, tmp_path: Path) -> None:
        empty = tmp_path / "empty-golden"
        empty.mkdir()
        args = ("golden", "check", "--golden-dir", str(empty), "--json")
        result = _same_answer(nerve_first, args, tmp_path)
        assert result.returncode == 1
        report = json.loads(result.stdout)
        assert report["ok"] is False and report["differences"]

    @pytest.mark.parametrize(
        "args", [("render", "--help"), ("memory", "--help"), ("diff", "--help"), ("dev", "--help")]
    )
    def test_the_packages_groups_answer_as_nerve_provisioner_does(
        self, nerve_first: Venv, tmp_path: Path, args: tuple[str, ...]
    ) -> None:
        result = _same_answer(nerve_first, args, tmp_path)
        assert result.returncode == 0
        assert result.stdout.startswith(f"usage: nerve {args[0]}")

    def test_a_render_through_nerve_writes_what_it_was_asked_for(
        self, nerve_first: Venv, tmp_path: Path
    ) -> None:
        out = tmp_path / "preview"
        args = ("render", "--backend", "loom", "--profile", "worker", "--out", str(out))
        result = nerve_first.run("nerve", *args, home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.endswith(f"(loom) into {out}\n")
        manifest = json.loads((out / ".nerve" / "provisioned.json").read_text(encoding="utf-8"))
        assert manifest["answers"]["memory_backend"] == "loom"
        assert manifest["answers"]["profile"] == "worker"

    def test_bad_input_to_a_package_group_is_its_one_line_and_status_2(
        self, nerve_first: Venv, tmp_path: Path
    ) -> None:
        args = ("render", "--profile", "nobody", "--out", str(tmp_path / "out"))
        result = nerve_first.run("nerve", *args, home=tmp_path)
        assert_one_line_error(result, "render", "--profile", "nobody")

    def test_an_option_before_the_group_is_nerves_syntax(
        self, nerve_first: Venv, tmp_path: Path
    ) -> None:
        """``nerve -c DIR golden`` is a Nerve command line: Nerve answers it."""
        result = nerve_first.run("nerve", "-c", str(tmp_path), "golden", "--help", home=tmp_path)
        assert result.returncode == 2
        assert "No such command 'golden'" in result.stderr


@pytest.mark.slow
class TestNerveInstalledAfterThePackage:
    """Nerve's script is ``bin/nerve``, untouched; the package is ``nerve-provisioner``."""

    def test_nerves_script_is_left_as_nerve_wrote_it(self, nerve_after: Venv) -> None:
        text = nerve_after.script("nerve").read_text(encoding="utf-8")
        assert "from nervestub.cli import main" in text
        assert "provisioner" not in text

    def test_a_nerve_that_mounted_the_package_runs_golden_check_and_memory(
        self, nerve_after: Venv, tmp_path: Path
    ) -> None:
        """``nerve golden check`` answers as ``nerve-provisioner golden check`` does."""
        empty = tmp_path / "empty-golden"
        empty.mkdir()
        check = ("golden", "check", "--golden-dir", str(empty), "--json")
        result = _same_answer(nerve_after, check, tmp_path / "check", env=STUB_ADOPTS)
        assert result.returncode == 1
        assert json.loads(result.stdout)["ok"] is False
        for args in (("render", "--help"), ("memory", "--help")):
            result = _same_answer(nerve_after, args, tmp_path / args[0], env=STUB_ADOPTS)
            assert result.stdout.startswith(f"usage: nerve {args[0]}")

    def test_a_nerve_that_did_not_mount_it_does_not_know_the_packages_groups(
        self, nerve_after: Venv, tmp_path: Path
    ) -> None:
        """Nerve's script is Nerve's: without ``extend_cli`` it has no ``golden``."""
        result = nerve_after.run("nerve", "golden", "check", home=tmp_path)
        assert result.returncode == 2
        assert "No such command 'golden'" in result.stderr


@pytest.mark.slow
class TestWithoutNerve:
    """No distribution named ``nerve``: ``nerve`` is the package's CLI, as the README says."""

    def test_nerve_and_nerve_provisioner_answer_the_same(
        self, without_nerve: Venv, tmp_path: Path
    ) -> None:
        for args in (("--version",), (), ("golden", "--help"), ("init", "--help")):
            _same_answer(without_nerve, args, tmp_path / (args[0] if args else "none"))
        version = without_nerve.run("nerve", "--version", home=tmp_path)
        assert version.stdout == "nerve 0.1.0\n"

    def test_nerve_init_provisions_the_workspace(self, without_nerve: Venv, tmp_path: Path) -> None:
        result = without_nerve.run("nerve", "init", "--non-interactive", home=tmp_path)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "nerve-workspace" / "AGENTS.md").is_file()
        assert "stub-nerve" not in result.stdout


class TestWhichCommandLineIsWhose:
    """NERVE-1: with Nerve installed only the package's own groups stay the package's."""

    @pytest.mark.parametrize("group", PACKAGE_GROUPS)
    def test_a_package_group_first_runs_the_package(self, group: str) -> None:
        assert runs_package_cli([group, "--help"], nerve_present=True)

    @pytest.mark.parametrize(
        "argv",
        [["init", "--memory-backend", "loom"], ["doctor"], ["--help"], [], ["-c", "x", "memory"]],
        ids=["init", "doctor", "--help", "nothing", "option first"],
    )
    def test_everything_else_is_nerves(self, argv: list[str]) -> None:
        assert not runs_package_cli(argv, nerve_present=True)

    @pytest.mark.parametrize("argv", [["init"], ["doctor"], [], ["start"]])
    def test_without_nerve_every_command_line_is_the_packages(self, argv: list[str]) -> None:
        assert runs_package_cli(argv, nerve_present=False)


def _probe(site: Path, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that also sees the distributions under ``site``."""
    env = clean_environment(site, {"PYTHONPATH": f"{site}:{REPO_ROOT}"})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=site,
        timeout=60,
    )


def _fake_distribution(site: Path, name: str, script: str) -> None:
    """Metadata of an installed distribution ``name`` declaring the console script ``script``."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[console_scripts]\nnerve = {script}\n", encoding="utf-8"
    )


FIND_SCRIPT = """
    from provisioner.cli.entry import nerve_console_script
    script = nerve_console_script()
    print(script.value if script else None)
"""


class TestFindingNerve:
    """Nerve's script comes from the metadata of the distribution named ``nerve``."""

    def test_the_script_is_read_from_the_distributions_entry_points(self, tmp_path: Path) -> None:
        _fake_distribution(tmp_path, "nerve", "somewhere.else:run")
        result = _probe(tmp_path, FIND_SCRIPT)
        assert result.stdout == "somewhere.else:run\n", result.stderr

    def test_no_distribution_named_nerve_means_no_nerve(self, tmp_path: Path) -> None:
        _fake_distribution(tmp_path, "nerve_helper", "somewhere.else:run")
        result = _probe(tmp_path, FIND_SCRIPT)
        assert result.stdout == "None\n", result.stderr

    def test_a_nerve_script_pointing_back_at_the_package_counts_as_none(
        self, tmp_path: Path
    ) -> None:
        _fake_distribution(tmp_path, "nerve", "provisioner.cli.entry:main")
        result = _probe(tmp_path, FIND_SCRIPT)
        assert result.stdout == "None\n", result.stderr

    def test_deciding_imports_neither_the_provisioning_side_nor_nerve(self, tmp_path: Path) -> None:
        """The entry stays cheap: only metadata is read before the decision."""
        _fake_distribution(tmp_path, "nerve", "somewhere.else:run")
        result = _probe(
            tmp_path,
            """
            import json, sys
            from provisioner.cli.entry import nerve_console_script, runs_package_cli
            runs_package_cli(["start"], nerve_console_script() is not None)
            print(json.dumps(sorted(sys.modules)))
            """,
        )
        loaded = json.loads(result.stdout)
        heavy = ("copier", "jinja2", "yaml", "click", "httpx", "somewhere")
        assert [m for m in loaded if m.split(".")[0] in heavy] == []
        assert [m for m in loaded if m.startswith("provisioner.")] == [
            "provisioner.cli",
            "provisioner.cli.entry",
        ]
