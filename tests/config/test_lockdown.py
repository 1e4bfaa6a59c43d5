"""Lockdown (CONF-3): tracked settings that name the switch as variables, seen three ways.

A locked instance reads no machine-local file, so its tracked ``settings.yaml`` names the
backend, the gateway and the dashboard link as ``${VAR:-default}`` references that the
service's environment fills. Each case loads the same settings with and without the
variables through ``load_config``, ``nerve doctor`` and ``memory_router``, and checks that all
three agree on backend, gateway and link — and that a ``config.local.yaml`` saying otherwise
is never read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from provisioner.config.loader import load_config
from provisioner.web import memory_router
from tests.support.processes import RunNerve, assert_one_line_error

LOCKED_SETTINGS = """\
lockdown: true
memory:
  backend: ${NERVE_MEMORY_BACKEND:-memu}
  loom:
    dashboard_url: ${LOOM_DASHBOARD_URL:-}
mcp_gateway_url: ${NERVE_MCP_BASE_URL:-}
"""

# What a machine-local file would switch to, if lockdown let it be read.
LOCAL_OVERRIDE = """\
memory:
  backend: loom
  loom:
    dashboard_url: https://local.example/never
mcp_gateway_url: http://127.0.0.1:1
"""

GATEWAY = "http://127.0.0.1:8787"
DASHBOARD = "https://loom.example/ns/ada"


@dataclass(frozen=True)
class Case:
    env: dict[str, str]
    backend: str
    gateway: str | None
    link: str | None


CASES = {
    "no variables: memU, no gateway, no link": Case({}, "memu", None, None),
    "empty variables: memU, no gateway, no link": Case(
        {"NERVE_MEMORY_BACKEND": "", "NERVE_MCP_BASE_URL": "", "LOOM_DASHBOARD_URL": ""},
        "memu",
        None,
        None,
    ),
    "every variable set: Loom, the gateway and the link": Case(
        {
            "NERVE_MEMORY_BACKEND": "loom",
            "NERVE_MCP_BASE_URL": GATEWAY,
            "LOOM_DASHBOARD_URL": DASHBOARD,
        },
        "loom",
        GATEWAY,
        DASHBOARD,
    ),
    "Loom and gateway, no dashboard variable: no link": Case(
        {"NERVE_MEMORY_BACKEND": "loom", "NERVE_MCP_BASE_URL": GATEWAY}, "loom", GATEWAY, None
    ),
    "a javascript: dashboard from the environment: no link": Case(
        {
            "NERVE_MEMORY_BACKEND": "loom",
            "NERVE_MCP_BASE_URL": GATEWAY,
            "LOOM_DASHBOARD_URL": "javascript:alert(1)",
        },
        "loom",
        GATEWAY,
        None,
    ),
}


@pytest.fixture
def locked(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with the locked settings, and a config folder with a local override."""
    workspace, config_dir = tmp_path / "ws", tmp_path / "cfg"
    (workspace / "config").mkdir(parents=True)
    config_dir.mkdir()
    (workspace / "config" / "settings.yaml").write_text(LOCKED_SETTINGS, encoding="utf-8")
    (config_dir / "config.local.yaml").write_text(LOCAL_OVERRIDE, encoding="utf-8")
    return workspace, config_dir


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
class TestLockedSwitch:
    def test_load_config(self, locked: tuple[Path, Path], case: Case) -> None:
        workspace, config_dir = locked
        config = load_config(config_dir, workspace, case.env)
        assert config.lockdown
        assert (config.memory_backend, config.mcp_gateway_url) == (case.backend, case.gateway)
        assert config.loom.dashboard_url == case.link
        local = [f for f in config.files if f.path.name == "config.local.yaml"]
        assert [(f.read, f.skipped) for f in local] == [(False, "lockdown")]

    def test_nerve_doctor(self, locked: tuple[Path, Path], case: Case, run_nerve: RunNerve) -> None:
        workspace, config_dir = locked
        result = run_nerve(
            "doctor",
            "--offline",
            "--json",
            "--workspace",
            str(workspace),
            "--config-dir",
            str(config_dir),
            env=case.env,
        )
        checks = {check["id"]: check for check in json.loads(result.stdout)["checks"]}
        assert (
            f"lockdown on, not read: {config_dir / 'config.local.yaml'}"
            in (checks["config.files"]["message"])
        )
        backend = checks["config.memory.backend"]
        assert backend["message"].startswith(f"memory.backend = {case.backend}, from ")
        assert "${NERVE_MEMORY_BACKEND" in backend["source"]
        gateway = checks["config.mcp_gateway_url"]["message"]
        assert gateway.startswith(f"mcp_gateway_url = {case.gateway or 'not set'}, from ")
        if case.backend == "loom":
            assert checks["loom.gateway"]["status"] == "OK"
            dashboard = checks["loom.dashboard"]
            if case.link:
                assert dashboard["message"].endswith(f"dashboard at {case.link}")
            else:
                assert "at http" not in dashboard["message"]
        else:
            assert checks["memu.store"]["status"] == "OK"
            assert "loom.gateway" not in checks

    def test_memory_router(self, locked: tuple[Path, Path], case: Case) -> None:
        workspace, config_dir = locked
        config = load_config(config_dir, workspace, case.env)
        client = TestClient(Starlette(routes=memory_router(config).routes))
        backend = client.get("/api/memory/backend").json()
        assert (backend["backend"], backend["dashboard_url"]) == (case.backend, case.link)
        diagnostics = client.get("/api/diagnostics/memory").json()
        assert diagnostics.get("gateway_url") == case.gateway
        page = client.get("/memory").text
        assert ("href=" in page) == (case.link is not None)
        if case.link:
            assert f'href="{case.link}"' in page


class TestLockdownVariable:
    def test_nerve_lockdown_0_does_not_unlock_settings_that_lock(
        self, locked: tuple[Path, Path]
    ) -> None:
        """CONF-3: the variable can turn lockdown on, never off."""
        workspace, config_dir = locked
        config = load_config(config_dir, workspace, {"NERVE_LOCKDOWN": "0"})
        assert config.lockdown
        assert config.memory_backend == "memu"


# --- CONF-3 at first init: every way of choosing lockdown reads the same layers ---------------

# A machine-local file naming Loom and a gateway: read, it would word the files for Loom.
LOCAL_NAMES_LOOM = "memory:\n  backend: loom\nmcp_gateway_url: http://127.0.0.1:1\n"
# A machine-local file that cannot load: read, it would stop init.
LOCAL_WOULD_NOT_LOAD = "memory:\n  backend: chroma\n"

# How the lockdown answer is given at first init: extra arguments, environment, typed input.
LOCK_WAYS = {
    "--data lockdown=true": (("--data", "lockdown=true"), {}, None),
    "NERVE_LOCKDOWN=1": ((), {"NERVE_LOCKDOWN": "1"}, None),
    "yes at the terminal prompt": (("--terminal",), {}, "\n" * 4 + "yes\n"),
}


def first_locked_init(
    run_nerve: RunNerve, tmp_path: Path, way: str, local: str, service_env: dict | None = None
) -> tuple[Path, Path, dict]:
    """Init a new workspace locked the given way, beside a machine-local file; the summary.

    ``service_env`` is more of the service's environment (``NERVE_MEMORY_BACKEND``, …).
    """
    args, env, typed = LOCK_WAYS[way]
    env = {**env, **(service_env or {})}
    workspace, config_dir = tmp_path / "ws", tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.local.yaml").write_text(local, encoding="utf-8")
    result = run_nerve(
        "init",
        "--json",
        *args,
        "--workspace",
        str(workspace),
        "--config-dir",
        str(config_dir),
        env=env,
        input=typed,
    )
    assert result.returncode == 0, result.stderr
    return workspace, config_dir, json.loads(result.stdout)


def doctor_checks(
    run_nerve: RunNerve, workspace: Path, config_dir: Path, env: dict | None = None
) -> dict[str, dict]:
    """``nerve doctor --offline`` on the instance, its checks by id."""
    places = ("--workspace", str(workspace), "--config-dir", str(config_dir))
    doctor = run_nerve("doctor", "--offline", "--json", *places, env=env or {})
    return {check["id"]: check for check in json.loads(doctor.stdout)["checks"]}


@pytest.mark.parametrize("way", LOCK_WAYS)
class TestLockedAtFirstInit:
    def test_the_local_file_is_not_read_and_doctor_finds_the_wording_right(
        self, run_nerve: RunNerve, tmp_path: Path, way: str
    ) -> None:
        """CONF-3: a locked first init never words the files for what config.local.yaml names.

        The locked instance reads `${NERVE_MEMORY_BACKEND:-memu}` from its tracked settings;
        with the variable unset that is memU, so doctor must find memU's wording.
        """
        workspace, config_dir, summary = first_locked_init(
            run_nerve, tmp_path, way, LOCAL_NAMES_LOOM
        )
        assert summary["locked"] is True and summary["answers"]["lockdown"] is True
        assert (summary["wording"], summary["wording_source"]) == ("memu", "default")
        assert summary["memory"] == {"backend": "memu", "asked": False, "locked": True}
        checks = doctor_checks(run_nerve, workspace, config_dir, LOCK_WAYS[way][1])
        assert checks["workspace.wording"]["status"] == "OK", checks["workspace.wording"]
        assert checks["config.memory.backend"]["message"].startswith("memory.backend = memu")
        assert "lockdown on, not read" in checks["config.files"]["message"]

    def test_the_service_s_variables_word_the_files_from_the_first_init(
        self, run_nerve: RunNerve, tmp_path: Path, way: str
    ) -> None:
        """CONF-3: the settings this init places name ${NERVE_MEMORY_BACKEND}; set to loom,
        the files are worded for Loom at once, not for memU until a second init."""
        service = {"NERVE_MEMORY_BACKEND": "loom", "NERVE_MCP_BASE_URL": GATEWAY}
        workspace, config_dir, summary = first_locked_init(
            run_nerve, tmp_path, way, LOCAL_WOULD_NOT_LOAD, service
        )
        assert summary["locked"] is True and summary["wording"] == "loom"
        assert summary["wording_source"] == str(workspace / "config" / "settings.yaml")
        checks = doctor_checks(run_nerve, workspace, config_dir, {**LOCK_WAYS[way][1], **service})
        assert checks["workspace.wording"]["status"] == "OK", checks["workspace.wording"]
        assert checks["config.memory.backend"]["message"].startswith("memory.backend = loom")

    def test_a_local_file_that_would_not_load_does_not_stop_it(
        self, run_nerve: RunNerve, tmp_path: Path, way: str
    ) -> None:
        """CONF-3: the file is not opened at all, so its errors cannot stop a locked init."""
        _workspace, _config_dir, summary = first_locked_init(
            run_nerve, tmp_path, way, LOCAL_WOULD_NOT_LOAD
        )
        assert summary["locked"] is True and summary["wording"] == "memu"


def test_every_way_of_locking_writes_the_same_workspace(
    run_nerve: RunNerve, tmp_path: Path
) -> None:
    """CONF-3: the three ways give byte-identical files and the same recorded answers."""
    manifests = []
    for index, way in enumerate(LOCK_WAYS):
        folder = tmp_path / f"way{index}"
        folder.mkdir()
        workspace, _config_dir, _summary = first_locked_init(
            run_nerve, folder, way, LOCAL_NAMES_LOOM
        )
        manifests.append(json.loads((workspace / ".nerve" / "provisioned.json").read_text()))
    assert all(manifest == manifests[0] for manifest in manifests[1:])
    assert manifests[0]["answers"]["memory_backend"] == "memu"


def test_unlocked_init_still_follows_the_local_file(run_nerve: RunNerve, tmp_path: Path) -> None:
    """INIT-2: without lockdown the machine-local file is read and names the wording."""
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.local.yaml").write_text(LOCAL_NAMES_LOOM, encoding="utf-8")
    result = run_nerve(
        "init",
        "--json",
        "--workspace",
        "ws",
        "--config-dir",
        str(config_dir),
        "--data",
        "lockdown=false",
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["wording"] == "loom" and summary["locked"] is False
    assert summary["wording_source"].endswith("config.local.yaml")


def test_no_at_the_terminal_prompt_reads_the_local_file_and_its_error_stops_init(
    run_nerve: RunNerve, tmp_path: Path
) -> None:
    """CONF-3, CONF-7: answered "no", the instance would read the file, so its error counts."""
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.local.yaml").write_text(LOCAL_WOULD_NOT_LOAD, encoding="utf-8")
    result = run_nerve(
        "init",
        "--terminal",
        "--workspace",
        "ws",
        "--config-dir",
        str(config_dir),
        input="\n" * 4 + "no\n",
    )
    assert_one_line_error(result, "config.local.yaml", "'chroma' is not a memory backend")
    assert not (tmp_path / "ws").exists()


# --- CONF-3 at a later init: the settings it places decide what the instance reads -----------


def init_again(run_nerve: RunNerve, tmp_path: Path, *flags: str) -> dict:
    result = run_nerve(
        "init", "--json", "--workspace", "ws", "--config-dir", str(tmp_path / "cfg"), *flags
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_unlocking_reads_the_local_file_the_unlocked_instance_will_read(
    run_nerve: RunNerve, tmp_path: Path
) -> None:
    """CONF-3: `--data lockdown=false` on a locked workspace re-words its settings to unlock
    it, so init follows config.local.yaml as the instance then will, and doctor agrees."""
    workspace, config_dir, _summary = first_locked_init(
        run_nerve, tmp_path, "--data lockdown=true", LOCAL_NAMES_LOOM
    )
    summary = init_again(run_nerve, tmp_path, "--data", "lockdown=false")
    assert summary["locked"] is False and summary["wording"] == "loom"
    assert summary["wording_source"] == str(config_dir / "config.local.yaml")
    assert "config/settings.yaml" in summary["reworded"]
    assert "lockdown" not in (workspace / "config" / "settings.yaml").read_text().split()
    checks = doctor_checks(run_nerve, workspace, config_dir)
    assert checks["workspace.wording"]["status"] == "OK", checks["workspace.wording"]
    assert "lockdown on" not in checks["config.files"]["message"]


def test_locking_later_stops_reading_the_local_file(run_nerve: RunNerve, tmp_path: Path) -> None:
    """CONF-3: the reverse, on a workspace first provisioned unlocked for Loom: the locked
    settings it places name the service's variable, which init follows, never the local file."""
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.local.yaml").write_text(LOCAL_NAMES_LOOM, encoding="utf-8")
    assert init_again(run_nerve, tmp_path)["wording"] == "loom"
    result = run_nerve(
        *("init", "--json", "--workspace", "ws", "--config-dir", str(tmp_path / "cfg")),
        *("--data", "lockdown=true"),
        env={"NERVE_MEMORY_BACKEND": "memu"},
    )
    summary = json.loads(result.stdout)
    assert summary["locked"] is True and summary["wording"] == "memu"
    assert summary["wording_source"] == str(Path("ws", "config", "settings.yaml"))


@pytest.mark.parametrize(
    ("first", "then", "said"),
    [
        ("false", "true", "does not set lockdown: true, so this instance is not locked"),
        ("true", "false", "sets lockdown: true, so this instance stays locked"),
    ],
)
def test_an_edited_settings_file_that_is_kept_overrules_the_answer_and_says_so(
    run_nerve: RunNerve, tmp_path: Path, first: str, then: str, said: str
) -> None:
    """INIT-5, CONF-3: init never overwrites an edit, so the kept file decides lockdown; the
    summary tells the truth about it and a warning says what to change."""
    (tmp_path / "cfg").mkdir()
    init_again(run_nerve, tmp_path, "--data", f"lockdown={first}")
    settings = tmp_path / "ws" / "config" / "settings.yaml"
    settings.write_text(settings.read_text() + "# edited by the operator\n")
    summary = init_again(run_nerve, tmp_path, "--data", f"lockdown={then}")
    assert summary["locked"] is (first == "true")
    assert summary["kept"][0]["path"] == "config/settings.yaml"
    assert [line for line in summary["warnings"] if said in line]


@pytest.mark.parametrize(
    ("args", "typed"),
    [(("--data", "lockdown=false"), None), (("--terminal",), "\n" * 4 + "no\n")],
    ids=["--data", "no at the prompt"],
)
def test_answering_no_under_nerve_lockdown_1_is_refused_and_writes_nothing(
    run_nerve: RunNerve, tmp_path: Path, args: tuple[str, ...], typed: str | None
) -> None:
    """CONF-3: the variable locks the instance whatever its settings say; settings written
    unlocked would name none of the service's variables, so the two answers cannot both hold."""
    result = run_nerve(
        *("init", "--workspace", "ws", "--config-dir", str(tmp_path / "cfg"), *args),
        env={"NERVE_LOCKDOWN": "1"},
        input=typed,
    )
    if typed is None:
        assert_one_line_error(result, "lockdown: answered no, but NERVE_LOCKDOWN=1 locks")
    else:
        assert result.returncode == 2 and "NERVE_LOCKDOWN=1 locks" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "ws").exists()
