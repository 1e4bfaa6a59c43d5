"""Crashes and races: init's files stay init's at every moment (INIT-7, defects 3 and 4).

A real ``nerve init`` process is killed with SIGKILL at a chosen step of its writes: the
wrapper below counts the renames and removals init makes in the workspace and kills its own
process just before or just after the chosen one. A re-run must then finish the job: the
workspace equals a fresh render, and no file of init's is reported as kept.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.workspace.fs import WorkspaceRoot
from provisioner.workspace.lock import LOCK_PATH, WorkspaceBusy, WorkspaceLock
from tests.runner import run_cli
from tests.support.processes import assert_one_line_error, clean_environment
from tests.support.repo import REPO_ROOT

# More examples on demand:
# NERVE_PROPERTY_EXAMPLES=200 python3 -m pytest tests/workspace/test_init_interruptions.py
EXAMPLES = int(os.environ.get("NERVE_PROPERTY_EXAMPLES", "4"))

# Runs the CLI, killing itself (SIGKILL) around the Nth step: a rename or removal relative to
# a folder descriptor, which is how init changes the workspace (the scratch folder's clean-up
# counts too: more points to stop at). argv[1] is the
# step, argv[2] "before" or "after"; a step of 0 only counts, and prints the count on exit.
KILL_WRAPPER = """
import atexit, os, signal, sys
step, when = int(sys.argv[1]), sys.argv[2]
del sys.argv[1:3]
seen = 0
def counted(real):
    def call(*args, **kwargs):
        global seen
        if kwargs.get("dir_fd") is None and kwargs.get("src_dir_fd") is None:
            return real(*args, **kwargs)
        seen += 1
        if seen == step and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            return real(*args, **kwargs)
        finally:
            if seen == step and when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
    return call
os.replace = counted(os.replace)
os.unlink = counted(os.unlink)
if step == 0:
    atexit.register(lambda: sys.stderr.write(f"steps={seen}\\n"))
from provisioner.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            executable = bool(path.stat().st_mode & stat.S_IXUSR)
            files[path.relative_to(root).as_posix()] = (path.read_bytes(), executable)
    return files


class Runner:
    """The CLI in a fresh folder, plain or under the kill wrapper."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "home").mkdir(parents=True, exist_ok=True)
        self.env = clean_environment(folder / "home", {"PYTHONPATH": str(REPO_ROOT)})

    def nerve(self, *args: str) -> subprocess.CompletedProcess:
        """The CLI run in this process (``tests.runner``)."""
        return run_cli(args, env=self.env, cwd=self.folder)

    def nerve_process(self, *args: str) -> subprocess.CompletedProcess:
        """The CLI as a process of its own, to meet a lock this process holds."""
        return subprocess.run(
            [sys.executable, "-m", "provisioner", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.folder,
            timeout=120,
            input="",
        )

    def killed_at(self, step: int, when: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", KILL_WRAPPER, str(step), when, *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.folder,
            timeout=120,
            input="",
        )


def init_ok(runner: Runner, *args: str, process: bool = False) -> dict:
    """``init --non-interactive --json`` (``process``: in a process of its own)."""
    run = runner.nerve_process if process else runner.nerve
    result = run("init", "--non-interactive", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def count_steps(runner: Runner, prepare, args: tuple[str, ...]) -> int:
    """How many workspace steps the run makes (on a throwaway copy of its starting point)."""
    prepare()
    result = runner.killed_at(0, "after", "init", "--non-interactive", *args)
    assert result.returncode == 0, result.stderr
    steps = int(result.stderr.strip().splitlines()[-1].removeprefix("steps="))
    shutil.rmtree(runner.folder / "ws")
    return steps


class Scenario:
    """Where a run starts, what it is asked, and the render it must end up equal to."""

    def __init__(self, name: str, first: tuple[str, ...] | None, args: tuple[str, ...]) -> None:
        self.name = name
        self.first = first
        self.args = (*args, "--workspace", "ws")
        self.base = Path(tempfile.mkdtemp(prefix=f"nerve-{name}-"))
        reference = Runner(self.base / "reference")
        init_ok(reference, *self.args)
        self.expected = tree(reference.folder / "ws")
        counter = Runner(self.base / "counter")
        self.steps = count_steps(counter, lambda: self.prepare(counter), self.args)

    def prepare(self, runner: Runner) -> None:
        if self.first is not None:
            init_ok(runner, *self.first, "--workspace", "ws")


SCENARIOS: dict[str, Scenario] = {}


@pytest.fixture(scope="module", autouse=True)
def scenarios_removed_after_the_module():
    """Each scenario's reference render is built once and kept for the module's examples; its
    folder goes with the module, so no run leaves one behind in the temporary folder."""
    yield
    for case in SCENARIOS.values():
        shutil.rmtree(case.base, ignore_errors=True)
    SCENARIOS.clear()


def scenario(name: str) -> Scenario:
    """Built once per test process: the reference render and the step count."""
    if name not in SCENARIOS:
        if name == "first-init":
            SCENARIOS[name] = Scenario(name, None, ("--memory-backend", "loom"))
        else:
            SCENARIOS[name] = Scenario(name, (), ("--memory-backend", "loom"))
    return SCENARIOS[name]


@pytest.mark.slow
class TestKilledAtARandomPoint:
    @pytest.mark.parametrize("name", ["first-init", "re-word"])
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(data=st.data())
    def test_a_rerun_after_kill_dash_nine_equals_a_fresh_render_and_keeps_nothing(self, name, data):
        """INIT-7: kill -9 anywhere in a first init or a re-word; the re-run finishes the job."""
        case = scenario(name)
        step = data.draw(st.integers(min_value=1, max_value=case.steps), label="step")
        when = data.draw(st.sampled_from(["before", "after"]), label="when")
        folder = Path(tempfile.mkdtemp(dir=case.base))
        runner = Runner(folder)
        case.prepare(runner)
        killed = runner.killed_at(step, when, "init", "--non-interactive", *case.args)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        summary = init_ok(runner, *case.args)
        assert summary["kept"] == []
        assert tree(folder / "ws") == case.expected
        shutil.rmtree(folder)


class TestCrashLeftovers:
    def test_a_first_init_killed_mid_write_leaves_no_empty_file_kept_as_edited(self, tmp_path):
        """Defect 3: the old 0-byte file that later runs kept forever cannot appear."""
        runner = Runner(tmp_path)
        killed = runner.killed_at(3, "before", "init", "--non-interactive", "--workspace", "ws")
        assert killed.returncode == -signal.SIGKILL
        for path in (tmp_path / "ws").rglob("*"):
            if path.is_file() and not path.name.endswith(".nerve-tmp"):
                assert path.stat().st_size > 0 or path.name == "init.lock", path
        summary = init_ok(runner, "--workspace", "ws")
        assert summary["kept"] == []

    def test_a_failed_reword_leaves_inits_files_as_inits(self, tmp_path):
        """Defect 3: a re-word that dies half-way; the next run re-words, keeps nothing."""
        runner = Runner(tmp_path)
        init_ok(runner, "--workspace", "ws")
        killed = runner.killed_at(
            4, "after", "init", "--non-interactive", "--workspace", "ws", "--memory-backend", "loom"
        )
        assert killed.returncode == -signal.SIGKILL
        again = init_ok(runner, "--workspace", "ws", "--memory-backend", "loom")
        assert again["kept"] == []
        assert again["reworded"]  # the files the killed run had not reached yet


class TestOneInitAtATime:
    def test_a_second_init_waits_for_the_first_and_then_runs(self, tmp_path):
        """INIT-7: the lock is held by another process for a moment; init waits, then works."""
        runner = Runner(tmp_path)
        init_ok(runner, "--workspace", "ws")
        lock_file = tmp_path / "ws" / LOCK_PATH
        handle = open(lock_file, "a+")  # noqa: SIM115 - held across the thread below
        fcntl.flock(handle, fcntl.LOCK_EX)
        release = threading.Timer(1.0, handle.close)
        release.start()
        try:
            summary = init_ok(runner, "--workspace", "ws", "--memory-backend", "loom", process=True)
        finally:
            release.join()
        assert summary["kept"] == []
        assert not lock_file.exists()

    @pytest.mark.slow
    def test_a_second_init_gives_up_naming_the_holders_pid(self, tmp_path):
        """INIT-7: held past the wait, the second init fails with one line naming the pid."""
        runner = Runner(tmp_path)
        init_ok(runner, "--workspace", "ws")
        with open(tmp_path / "ws" / LOCK_PATH, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.write("424242\n")
            handle.flush()
            result = runner.nerve_process("init", "--workspace", "ws", "--memory-backend", "loom")
        assert_one_line_error(result, "pid 424242", "init.lock")
        assert "loom" not in (tmp_path / "ws" / "AGENTS.md").read_text().lower().split("mcp__")[0]

    def test_two_inits_at_once_leave_nothing_reported_as_edited(self, tmp_path):
        """Defect 4: two concurrent runs with different wordings; a third run keeps nothing."""
        runner = Runner(tmp_path)
        command = [sys.executable, "-m", "provisioner", "init", "--json", "--workspace", "ws"]
        processes = [
            subprocess.Popen(
                [*command, "--memory-backend", backend],
                env=runner.env,
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for backend in ("memu", "loom")
        ]
        for process in processes:
            _out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
        summary = init_ok(runner, "--workspace", "ws", "--memory-backend", "memu")
        assert summary["kept"] == []


class TestLockObject:
    def test_the_wait_is_measured_on_the_injected_clock(self, tmp_path):
        """INIT-7: the waiter polls until its deadline, then names the holder's pid."""
        (tmp_path / "ws").mkdir()
        now = [0.0]

        def sleep(seconds: float) -> None:
            now[0] += seconds

        with (
            WorkspaceRoot(tmp_path / "ws") as root,
            WorkspaceLock(root),
            WorkspaceRoot(tmp_path / "ws") as other,
        ):
            waiter = WorkspaceLock(other, wait_s=2.0, clock=lambda: now[0], sleep=sleep)
            with pytest.raises(WorkspaceBusy, match=f"pid {os.getpid()}"):
                waiter.__enter__()
        assert now[0] >= 2.0

    def test_the_lock_file_is_gone_after_the_holder_finishes(self, tmp_path):
        (tmp_path / "ws").mkdir()
        with WorkspaceRoot(tmp_path / "ws") as root:
            with WorkspaceLock(root):
                assert (tmp_path / "ws" / LOCK_PATH).read_text().strip() == str(os.getpid())
            assert not (tmp_path / "ws" / LOCK_PATH).exists()
