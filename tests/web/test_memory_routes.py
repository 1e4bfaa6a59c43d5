"""The Memory page's routes over loopback HTTP: backend, diagnostics, 409 for memU edits (DOC-3)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from provisioner.config.loader import Config, LoomSettings
from tests.web.serving import DiagnosticsSnapshot, Serve

LOOM = "memory:\n  backend: loom\nmcp_gateway_url: http://127.0.0.1:8787\n"
DASHBOARD = "https://loom.example/ns/ada"


def loom_config(dashboard_url: str | None) -> Config:
    """A Config built without the loader, as a caller could: the router must check on its own."""
    return Config(
        memory_backend="loom",
        mcp_gateway_url="http://127.0.0.1:8787",
        loom=LoomSettings(dashboard_url=dashboard_url),
        lockdown=False,
        files=(),
        sources={},
        warnings=(),
        data={},
    )


class TestBackend:
    def test_under_memu_memory_is_kept_in_memu_without_a_link(
        self, serve: Serve, configure
    ) -> None:
        base = serve(configure("memory:\n  backend: memu\n"))
        answer = httpx.get(f"{base}/api/memory/backend")
        assert answer.status_code == 200
        assert answer.json() == {"backend": "memu", "kept_in": "memU", "dashboard_url": None}

    def test_under_loom_memory_is_kept_in_loom_with_the_dashboard(
        self, serve: Serve, configure
    ) -> None:
        """DOC-3: whatever serves the page learns memory is kept in Loom, with the link."""
        config = configure(
            LOOM.replace("loom\n", f"loom\n  loom:\n    dashboard_url: {DASHBOARD}\n", 1)
        )
        answer = httpx.get(f"{serve(config)}/api/memory/backend")
        assert answer.json() == {"backend": "loom", "kept_in": "Loom", "dashboard_url": DASHBOARD}

    @pytest.mark.parametrize(
        "url",
        [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "java\tscript:alert(1)",
            "/ns/ada",
            "//evil.example/x",
            "data:text/html,hi",
            "https://",
            " https://loom.example",
        ],
    )
    def test_a_dashboard_url_that_is_not_absolute_http_is_never_given_out(
        self, serve: Serve, url: str
    ) -> None:
        """CONF-5: even a Config built without the loader gets no link for such a URL."""
        answer = httpx.get(f"{serve(loom_config(url))}/api/memory/backend")
        assert answer.json()["dashboard_url"] is None


class TestMemuEdits:
    @pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
    @pytest.mark.parametrize("path", ["/api/memory/memu", "/api/memory/memu/items/42"])
    def test_under_loom_every_memu_edit_is_a_409_with_a_one_line_reason(
        self, serve: Serve, configure, method: str, path: str
    ) -> None:
        """DOC-3: memU's edit operations refuse with a conflict under Loom."""
        base = serve(configure(LOOM))
        answer = httpx.request(method, f"{base}{path}", json={"content": "x"})
        assert answer.status_code == 409
        reason = answer.json()["error"]
        assert "\n" not in reason
        assert reason.startswith("memory is kept in Loom")

    def test_under_memu_the_edit_routes_are_left_to_nerve(self, serve: Serve, configure) -> None:
        """Under memU this router does not answer memU's routes: Nerve's own ones do."""
        base = serve(configure("memory:\n  backend: memu\n"))
        assert httpx.put(f"{base}/api/memory/memu/items/1").status_code == 404


class TestDiagnostics:
    def test_under_loom_the_backends_diagnostics_are_served(self, serve: Serve, configure) -> None:
        """LOOM-4: GET /api/diagnostics/memory gives the backend's diagnostics."""
        snapshot = {"gateway_url": "http://127.0.0.1:8787", "breaker": {"state": "closed"}}
        base = serve(configure(LOOM), DiagnosticsSnapshot(snapshot))
        assert httpx.get(f"{base}/api/diagnostics/memory").json() == {"backend": "loom", **snapshot}

    def test_under_loom_without_a_running_backend_the_configuration_speaks(
        self, serve: Serve, configure
    ) -> None:
        answer = httpx.get(f"{serve(configure(LOOM))}/api/diagnostics/memory").json()
        assert answer["available"] is False
        assert answer["gateway_url"] == "http://127.0.0.1:8787"

    def test_under_memu_the_diagnostics_say_memu(self, serve: Serve, configure) -> None:
        answer = httpx.get(f"{serve(configure(''))}/api/diagnostics/memory").json()
        assert answer == {"backend": "memu", "kept_in": "memU"}


class TestPageResponse:
    def test_the_page_forbids_scripts_and_outside_resources(self, serve: Serve, configure) -> None:
        answer = httpx.get(f"{serve(configure(LOOM))}/memory")
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/html")
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff"


class TestImportBoundary:
    @pytest.mark.parametrize(
        "module", ["provisioner.runtime", "provisioner.cli.main", "provisioner.doctor.run"]
    )
    def test_only_provisioner_web_loads_starlette(self, module: str) -> None:
        """The runtime and the CLI never import the web extra."""
        code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        loaded = set(json.loads(done.stdout))
        assert "starlette" not in loaded
        assert "provisioner.web" not in loaded
