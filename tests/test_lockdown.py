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
from tests.conftest import RunNerve

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
