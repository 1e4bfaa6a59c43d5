"""``nerve doctor`` under Loom against loopback gateways: catalog, deadlines, offline (DOC-1)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.doctor import network
from provisioner.doctor.network import CATALOG_WAIT_S, NETWORK_CHECK_DEADLINE_S
from provisioner.runtime.gateway import catalog
from provisioner.runtime.gateway.catalog import CATALOG_DEADLINE_S
from provisioner.runtime.loom import backend
from tests.fakes.gateway import LOOM_TOOLS, FakeGateway, catalog_payload, loom_server
from tests.support.loopback import CountingListener, LoopbackServer, closed_port_url
from tests.support.processes import RunNerve

DOC_1_WHOLE_RUN_S = 10.0  # DOC-1: with the gateway down, doctor ends within this
SHORT_WAIT_S = 1.0  # an answer that never comes, waited for this long instead


@pytest.fixture(scope="module")
def catalog_app() -> Iterator[FakeGateway]:
    app = FakeGateway(catalog=catalog_payload([loom_server()]))
    server = LoopbackServer(app)
    app.base_url = server.start()
    yield app
    server.stop()


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    stuck = CountingListener()
    yield stuck
    stuck.close()


@pytest.fixture
def doctor(tmp_path: Path, run_nerve: RunNerve):
    """``doctor(url, *flags, memory=YAML)``: doctor on a Loom configuration; its JSON checks.

    ``memory`` is more YAML under ``memory:``, indented by two spaces.
    """
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()

    def run(
        gateway_url: str, *flags: str, memory: str = ""
    ) -> tuple[subprocess.CompletedProcess, dict[str, Any]]:
        (config_dir / "config.yaml").write_text(
            f"memory:\n  backend: loom\n{memory}mcp_gateway_url: {gateway_url}\n",
            encoding="utf-8",
        )
        args = ["doctor", "--json", "--config-dir", str(config_dir)]
        result = run_nerve(*args, "--workspace", str(tmp_path / "ws"), *flags)
        assert result.returncode in (0, 1), result.stderr
        return result, {check["id"]: check for check in json.loads(result.stdout)["checks"]}

    return run


class TestOffline:
    def test_offline_makes_no_connection_at_all(self, doctor, listener: CountingListener) -> None:
        """DOC-1: --offline makes no network call."""
        _result, checks = doctor(listener.url, "--offline")
        assert listener.connections == 0
        assert "loom.catalog" not in checks
        assert checks["loom.gateway"]["status"] == "OK"

    def test_without_offline_the_same_setup_does_connect(
        self, doctor, listener: CountingListener, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The counter above can see a connection: this run, without --offline, makes one.

        The listener never answers; doctor's catalog and health reads wait SHORT_WAIT_S for
        it, not their 5 s deadlines (the slow tier's test below waits those out)."""
        monkeypatch.setattr(network, "CATALOG_WAIT_S", SHORT_WAIT_S)
        monkeypatch.setattr(catalog, "CATALOG_DEADLINE_S", SHORT_WAIT_S)
        monkeypatch.setattr(backend, "HEALTH_DEADLINE_S", SHORT_WAIT_S)
        _result, checks = doctor(listener.url)
        assert listener.connections >= 1
        assert checks["loom.catalog"]["status"] == "ERR"


class TestCatalog:
    def test_a_catalog_listing_loom_is_ok_with_its_generation_and_tools(
        self, doctor, catalog_app: FakeGateway
    ) -> None:
        """DOC-1: whether the catalog lists loom, its generation, and which of Loom's tools."""
        catalog_app.catalog = catalog_payload([loom_server()], generation=42)
        _result, checks = doctor(catalog_app.base_url)
        catalog = checks["loom.catalog"]
        assert catalog["status"] == "OK"
        assert catalog["message"].startswith("catalog generation 42 lists loom with 7 of Loom's")
        assert "loom_search" in catalog["message"]
        assert catalog["source"] == f"{catalog_app.base_url}/catalog"

    def test_tools_of_the_default_list_the_catalog_leaves_out_are_named(
        self, doctor, catalog_app: FakeGateway
    ) -> None:
        tools = [tool for tool in LOOM_TOOLS if tool != "loom_namespace_validate"]
        catalog_app.catalog = catalog_payload([loom_server(tools)])
        _result, checks = doctor(catalog_app.base_url)
        assert checks["loom.catalog"]["message"].endswith("; not offered: loom_namespace_validate")

    def test_a_catalog_without_loom_is_an_err_with_the_rollout_advice(
        self, doctor, catalog_app: FakeGateway
    ) -> None:
        """Rollout: switch only once the catalog lists loom."""
        other = {"id": "github", "path": "/s/github/mcp", "tools": ["search_code"]}
        catalog_app.catalog = catalog_payload([other], generation=3)
        result, checks = doctor(catalog_app.base_url)
        assert result.returncode == 1
        catalog = checks["loom.catalog"]
        assert catalog["status"] == "ERR"
        assert catalog["message"].startswith("catalog generation 3 does not list loom")
        assert "keep memory.backend: memu" in catalog["advice"]


class TestGatewayDown:
    def test_an_unreachable_gateway_is_an_err_and_the_run_ends(self, doctor) -> None:
        """DOC-1: gateway down → ERR, exit 1, and the run ends (a hang would meet the
        subprocess's own timeout and fail the test)."""
        result, checks = doctor(closed_port_url())
        assert result.returncode == 1
        catalog = checks["loom.catalog"]
        assert catalog["status"] == "ERR"
        assert "was not reached" in catalog["message"]
        assert catalog["advice"] == "start the gateway, or correct mcp_gateway_url"

    @pytest.mark.slow
    def test_a_gateway_that_never_answers_is_an_err_after_its_deadline(
        self, doctor, listener: CountingListener
    ) -> None:
        """DOC-1, GW-2: a stuck gateway costs one catalog deadline, then an ERR.

        The listener never answers, so only the reader's own deadline ends the check: the
        message names it, and it is within DOC-1's 10 s for the whole run.
        """
        result, checks = doctor(listener.url)
        assert result.returncode == 1
        assert listener.connections >= 1
        assert (
            f"did not arrive within {CATALOG_DEADLINE_S:g} s" in checks["loom.catalog"]["message"]
        )
        assert CATALOG_WAIT_S < NETWORK_CHECK_DEADLINE_S < DOC_1_WHOLE_RUN_S


@pytest.fixture(scope="module")
def dev_gateway() -> Iterator[Any]:
    """The dev gateway (catalog and Loom stand-in) for the module; faults reset per test."""
    from provisioner.devgateway import serve_in_thread

    with serve_in_thread(seed=3) as gateway:
        yield gateway


@pytest.fixture
def gateway(dev_gateway: Any) -> Iterator[Any]:
    dev_gateway.app.faults.switch("")
    yield dev_gateway
    dev_gateway.app.faults.switch("")


class TestNamespace:
    def test_the_org_and_namespace_loom_resolved_are_shown_with_their_source(
        self, doctor, gateway: Any
    ) -> None:
        """DOC-1, LOOM-3: the health probe names what Loom resolved."""
        _result, checks = doctor(gateway.base_url)
        namespace = checks["loom.namespace"]
        assert namespace["status"] == "OK", namespace
        assert namespace["message"].startswith(
            "org dev (resolved by Loom), namespace agent (resolved by Loom)"
        )
        assert checks["loom.catalog"]["status"] == "OK"
        calls = [call.tool for call in gateway.app.calls]
        assert "loom_namespace_summary" in calls

    def test_a_namespace_set_in_memory_loom_says_so(self, doctor, gateway: Any) -> None:
        """LOOM-3: memory.loom.namespace overrides what Loom resolved, and doctor says so."""
        _result, checks = doctor(gateway.base_url, memory="  loom:\n    namespace: ada\n")
        assert "namespace ada (set in memory.loom)" in checks["loom.namespace"]["message"]

    def test_a_policy_refusal_of_the_probe_is_an_err_with_its_reason(
        self, doctor, gateway: Any
    ) -> None:
        gateway.app.faults.switch("policy@loom_namespace_summary")
        result, checks = doctor(gateway.base_url)
        assert result.returncode == 1
        namespace = checks["loom.namespace"]
        assert namespace["status"] == "ERR"
        assert namespace["message"].startswith("Loom's health probe failed: ")
        assert checks["loom.catalog"]["status"] == "OK", "the other check is unaffected"


class TestSweepState:
    def test_without_a_sweep_doctor_says_so_and_creates_nothing(
        self, doctor, tmp_path: Path
    ) -> None:
        _result, checks = doctor("http://127.0.0.1:9", "--offline")
        assert checks["loom.sweep"]["message"].startswith("no sweep has run yet")
        assert not (tmp_path / "cfg" / "memory").exists()

    def test_after_a_real_sweep_doctor_reads_its_state_without_changing_it(
        self, doctor, gateway: Any, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """The state of `nerve memory sweep`, read-only: sessions, skips, the batch budget."""
        messages = tmp_path / "messages.jsonl"
        lines = [
            {
                "session_id": "s1",
                "role": "user",
                "content": f"fact {n}",
                "created_at": "2026-01-01T00:00:00Z",
            }
            for n in range(3)
        ]
        messages.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        _result, _checks = doctor(gateway.base_url, "--offline")  # writes the configuration
        config = ["--config-dir", str(tmp_path / "cfg"), "--workspace", str(tmp_path / "ws")]
        imported = run_nerve("memory", "import", str(messages), *config)
        assert imported.returncode == 0, imported.stderr
        swept = run_nerve("memory", "sweep", "--once", *config)
        assert swept.returncode == 0, swept.stderr
        state = tmp_path / "cfg" / "memory" / "state.sqlite3"
        before = state.read_bytes()
        _result, checks = doctor(gateway.base_url, "--offline")
        sweep = checks["loom.sweep"]
        assert sweep["status"] == "OK"
        assert sweep["message"].startswith("1 session swept, 0 messages skipped"), sweep
        assert sweep["source"] == str(state)
        assert state.read_bytes() == before

    def test_a_sweep_that_met_an_error_leaves_it_for_doctor(
        self, doctor, gateway: Any, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        """LOOM-4: the last error a sweep met is kept in its state file; doctor shows it."""
        messages = tmp_path / "messages.jsonl"
        line = {
            "session_id": "s1",
            "role": "user",
            "content": "a fact",
            "created_at": "2026-01-01T00:00:00Z",
        }
        messages.write_text(json.dumps(line) + "\n", encoding="utf-8")
        _result, _checks = doctor(gateway.base_url, "--offline")  # writes the configuration
        config = ["--config-dir", str(tmp_path / "cfg"), "--workspace", str(tmp_path / "ws")]
        assert run_nerve("memory", "import", str(messages), *config).returncode == 0
        gateway.app.faults.switch("coded@loom_memory_set_from_messages")
        run_nerve("memory", "sweep", "--once", *config)
        _result, checks = doctor(gateway.base_url, "--offline")
        message = checks["loom.sweep"]["message"]
        assert " in extract: Loom's database unreachable: " in message, message
        assert "a fact" not in message

    def test_a_state_file_that_is_not_a_database_is_a_warn(self, doctor, tmp_path: Path) -> None:
        state = tmp_path / "cfg" / "memory" / "state.sqlite3"
        state.parent.mkdir(parents=True)
        state.write_bytes(b"not a database at all, just text" * 40)
        _result, checks = doctor("http://127.0.0.1:9", "--offline")
        assert checks["loom.sweep"]["status"] == "WARN"
        assert "cannot be read" in checks["loom.sweep"]["message"]
