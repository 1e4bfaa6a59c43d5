"""A command imports only what it runs (FLEET-5): counted in a real child process.

``--version`` and ``--help`` load none of the commands' code; a built-in command loads no
group's module; the runtime's commands — every command of ``memory``, which talk only to the
configuration, the state file, the transcripts, memU's store, the gateway and Loom — load
neither Copier nor Jinja nor the workspace's render, in each of their modes, against the dev
gateway on loopback. The child runs the command line's ``main`` and writes the names in
``sys.modules`` when it ends; nothing here times anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli.main import COMMAND_GROUPS, build_parser
from provisioner.devgateway import RunningGateway, serve_in_thread
from testbed.memu_db import MemuDb
from testbed.nerve_db import NerveDb, native
from tests.runner import run_cli
from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

# Modules a bare interpreter has not loaded that --version and --help may load: argparse and
# what it needs, and the few small modules of the package that build the parser. About 40
# today; the bound leaves room, and is far below the 400 the fleet, init, Jinja and YAML
# once brought in.
MODULES_BEYOND_BARE_MAX = 60
NEVER_FOR_USAGE = (
    "copier",
    "jinja2",
    "yaml",
    "asyncio",
    "sqlite3",
    "httpx",
    "provisioner.backends",
    "provisioner.fleet",
    "provisioner.workspace",
    "provisioner.runtime.loom",
    *(module for module, _summary in COMMAND_GROUPS.values()),
)
_CHILD = """
import atexit, json, os, sys
atexit.register(lambda: open(os.environ["MODULES_OUT"], "w").write(json.dumps(sorted(sys.modules))))
if len(sys.argv) > 1 and sys.argv[1] == "--bare":
    raise SystemExit(0)
from provisioner.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def loaded_by(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    """The exit status of ``nerve-provisioner ARGV`` in a child, and every module it loaded."""
    out = tmp_path / "modules.json"
    paths = [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = clean_environment(
        tmp_path / "home",
        {"PYTHONPATH": os.pathsep.join(paths), "MODULES_OUT": str(out)},
    )
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, set(json.loads(out.read_text()))


def loaded_under(modules: set[str], *roots: str) -> set[str]:
    return {name for name in modules if any(name == r or name.startswith(f"{r}.") for r in roots)}


class TestUsage:
    @pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
    def test_the_version_and_the_usage_load_no_command(
        self, tmp_path: Path, argv: list[str]
    ) -> None:
        _status, bare = loaded_by(tmp_path, "--bare")
        status, modules = loaded_by(tmp_path, *argv)
        assert status in (0, 2)  # the usage alone exits 2
        assert loaded_under(modules, *NEVER_FOR_USAGE) == set()
        assert len(modules - bare) <= MODULES_BEYOND_BARE_MAX, sorted(modules - bare)

    def test_a_built_in_command_loads_no_group(self, tmp_path: Path) -> None:
        status, modules = loaded_by(tmp_path, "init", "--help")
        assert status == 0
        groups = [module for module, _summary in COMMAND_GROUPS.values()]
        assert loaded_under(modules, *groups, "copier", "jinja2") == set()

    def test_a_group_loads_its_own_module_and_no_other(self, tmp_path: Path) -> None:
        status, modules = loaded_by(tmp_path, "doctor", "--help")
        assert status == 0
        others = [module for name, (module, _s) in COMMAND_GROUPS.items() if name != "doctor"]
        assert "provisioner.cli.doctor" in modules
        assert loaded_under(modules, *others) == set()

    def test_the_help_is_the_same_whether_the_groups_are_loaded_or_not(self) -> None:
        """Each group's help line kept in the command line's table is the group's own."""
        assert build_parser([]).format_help() == build_parser().format_help()
        assert build_parser(["init"]).format_help() == build_parser().format_help()


@pytest.fixture(scope="module")
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=3) as running:
        yield running


@pytest.fixture
def instance(tmp_path: Path, gateway: RunningGateway) -> Path:
    """A configuration folder on Loom through the dev gateway, with a memU store, a
    conversation file imported and Nerve's ``nerve.db`` beside it."""
    config = tmp_path / "config"
    config.mkdir()
    (tmp_path / "workspace").mkdir()
    (config / "config.local.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {gateway.base_url}\n", encoding="utf-8"
    )
    MemuDb(config / "memu.sqlite").add_items(2, prefix="fact")
    message = {
        "session_id": "s1",
        "role": "user",
        "content": "I take my tea with lemon.",
        "created_at": "2026-12-01T09:00:00+00:00",
    }
    (tmp_path / "chat.jsonl").write_text(json.dumps(message) + "\n", encoding="utf-8")
    nerve = NerveDb(tmp_path / "nerve" / "nerve.db")
    nerve.session("s1")
    nerve.add("s1", "user", "I take my coffee black.", created_at=native(1))
    nerve.close()
    folders = ["--workspace", str(tmp_path / "workspace"), "--config-dir", str(config)]
    imported = run_cli(["memory", "import", str(tmp_path / "chat.jsonl"), *folders])
    assert imported.returncode == 0, imported.stderr  # the sweeps below have a message to send
    return tmp_path


# Each runtime command in each of its modes, and a module loaded only when it really ran.
RUNTIME_COMMANDS = [
    (["memory", "import", "{chat}"], "provisioner.runtime.transcripts"),
    (["memory", "sweep"], "provisioner.runtime.sweep.sweeper"),
    (["memory", "sweep", "--json"], "provisioner.runtime.sweep.sweeper"),
    (["memory", "sweep", "--plan"], "provisioner.runtime.sweep.plan"),
    (["memory", "sweep", "--backfill", "all"], "provisioner.runtime.sweep.backfill"),
    (["memory", "sweep", "--nerve-db", "{nerve_db}"], "provisioner.runtime.nerve_db.transcripts"),
    (["memory", "status"], "provisioner.runtime.loom.backend"),
    (["memory", "status", "--json"], "provisioner.runtime.loom.backend"),
    (["memory", "recall", "s2"], "provisioner.runtime.loom.context_block"),
    (["memory", "recall", "s2", "--json"], "provisioner.runtime.loom.context_block"),
    (["memory", "migrate"], "provisioner.migration.migrate"),
    (["memory", "migrate", "--dry-run"], "provisioner.migration.migrate"),
    (["memory", "migrate", "--json"], "provisioner.migration.migrate"),
    (["memory", "switch"], "provisioner.config.local_file"),
]


class TestTheRuntimesCommands:
    def test_every_memory_command_is_tried(self) -> None:
        """A command added to ``memory`` is added here too, or this fails."""
        parser = build_parser(["memory"])
        group = next(a for a in parser._actions if a.dest == "command").choices["memory"]
        commands = next(a for a in group._actions if a.dest == "memory_command").choices
        assert set(commands) == {argv[1] for argv, _ran in RUNTIME_COMMANDS}

    @pytest.mark.parametrize(
        ("argv", "ran"), RUNTIME_COMMANDS, ids=[" ".join(argv) for argv, _ran in RUNTIME_COMMANDS]
    )
    def test_they_load_neither_copier_nor_jinja(
        self, instance: Path, argv: list[str], ran: str
    ) -> None:
        folders = ["--workspace", str(instance / "workspace"), "--config-dir"]
        places = {"chat": instance / "chat.jsonl", "nerve_db": instance / "nerve" / "nerve.db"}
        words = [word.format(**places) for word in argv]
        status, modules = loaded_by(instance, *words, *folders, str(instance / "config"))
        assert status == 0
        assert ran in modules  # it ran what the command is for
        assert loaded_under(modules, "copier", "jinja2", "provisioner.workspace") == set()
