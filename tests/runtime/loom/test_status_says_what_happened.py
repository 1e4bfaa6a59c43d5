"""``memory status`` for a monitor: a schema version, an overall status, and a last error that
says what happened rather than naming an exception class (FLEET-4).

Against the dev gateway on loopback, each fault a real gateway can answer with; the words are
those ``provisioner.runtime.loom.report.failure_words`` gives, and the JSON keeps ``kind`` (the
class name) for readers that already match on it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.loom.report import failure_words
from provisioner.runtime.state import AUDIT_BATCH, AuditEntry, StateStore

HEALTH = "loom_namespace_summary"


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=3, answers="mixed") as running:
        yield running


@pytest.fixture(autouse=True)
def no_nerve_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NERVE_WORKSPACE", "NERVE_CONFIG_DIR", "NERVE_LOCKDOWN", "NERVE_MEMORY_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def status(tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "config.local.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n", encoding="utf-8"
    )
    (tmp_path / "ws").mkdir(exist_ok=True)
    argv = ["memory", "status", *flags, "--config-dir", str(config_dir)]
    assert main([*argv, "--workspace", str(tmp_path / "ws")]) == 0
    return capsys.readouterr().out


def status_json(tmp_path: Path, url: str, capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(status(tmp_path, url, capsys, "--json"))


class TestTheOverallStatus:
    def test_a_loom_that_answers_is_ok_under_schema_1(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        report = status_json(tmp_path, gateway.base_url, capsys)
        assert (report["schema"], report["status"]) == (1, "ok")
        assert list(report)[:2] == ["schema", "status"]
        assert report["available"] is True and report["last_error"] is None

    def test_a_failed_probe_is_unavailable(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        gateway.app.faults.switch(f"coded:OVERLOADED@{HEALTH}")
        assert status_json(tmp_path, gateway.base_url, capsys)["status"] == "unavailable"

    def test_a_gateway_nobody_listens_on_is_unavailable(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        report = status_json(tmp_path, "http://127.0.0.1:9", capsys)
        assert report["status"] == "unavailable"
        assert report["last_error"]["what"] == "the gateway's catalog could not be read"

    def test_text_names_the_status_but_not_the_schema(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        text = status(tmp_path, gateway.base_url, capsys)
        assert text.startswith("status: ok\n")
        assert "schema" not in text

    def test_a_sweep_still_failing_is_degraded_until_a_batch_goes_through(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The probe goes through, but the sweep's last extraction failed and nothing went
        through since: Loom answers, and memory is not being written."""
        state_path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        with StateStore(state_path) as state:
            state.record_last_error(
                at=time.time() - 60, op="extract", kind="CodedFault", message="m"
            )
        assert status_json(tmp_path, gateway.base_url, capsys)["status"] == "degraded"
        with StateStore(state_path) as state:
            state.record_audit([AuditEntry(AUDIT_BATCH, "s", 1, detail="10")], now=time.time())
        report = status_json(tmp_path, gateway.base_url, capsys)
        assert report["last_error"]["batches_through_since"] == 1
        assert report["status"] == "ok"


class TestTheLastErrorSaysWhatHappened:
    def test_loom_overloaded_in_words_with_its_code(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        gateway.app.faults.switch(f"coded:OVERLOADED@{HEALTH}")
        last = status_json(tmp_path, gateway.base_url, capsys)["last_error"]
        assert (last["kind"], last["code"], last["what"]) == (
            "CodedFault",
            "OVERLOADED",
            "Loom overloaded",
        )
        text = status(tmp_path, gateway.base_url, capsys)
        assert "  kind: Loom overloaded (OVERLOADED)\n" in text
        assert "CodedFault" not in text

    def test_a_rate_limit_names_the_http_status_and_retry_after(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        gateway.app.faults.switch(f"429:120@{HEALTH}")
        last = status_json(tmp_path, gateway.base_url, capsys)["last_error"]
        assert last["kind"] == "MayPass"
        assert last["what"] == "the gateway's rate limit (HTTP 429); Retry-After 120 s"

    def test_a_503_names_its_status(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        gateway.app.faults.switch(f"503@{HEALTH}")
        text = status(tmp_path, gateway.base_url, capsys)
        assert "  kind: Loom or the gateway unavailable for now (HTTP 503)\n" in text
        assert "MayPass" not in text


class TestTheWords:
    @pytest.mark.parametrize(
        ("kept", "words"),
        [
            (("MayPass", None, "answered HTTP 502"), "the gateway could not reach Loom (HTTP 502)"),
            (
                ("MayPass", None, "unavailable"),
                "the gateway said to try again later (JSON-RPC -32002)",
            ),
            (("CodedFault", "BACKEND_UNAVAILABLE", "x"), "Loom's database unreachable"),
            (("CodedFault", "SOMETHING_NEW", "x"), "Loom could not do it now"),
            (("InternalFault", None, "x"), "Loom failed with an internal error"),
            (("GatewayUnreachable", None, "x"), "the gateway was not reached"),
            (("NoAnswer", None, "x"), "no answer came in time"),
            (("SomethingElse", None, "x"), "SomethingElse"),
        ],
    )
    def test_each_kept_failure_reads_as_what_happened(
        self, kept: tuple[str, str | None, str], words: str
    ) -> None:
        assert failure_words(*kept) == words

    def test_retry_after_is_said_only_when_it_is_a_number(self) -> None:
        assert failure_words("MayPass", None, "HTTP 429", 1.5).endswith("; Retry-After 1.5 s")
        assert failure_words("MayPass", None, "HTTP 429", True) == (
            "the gateway's rate limit (HTTP 429)"
        )
