"""``nerve memory recall`` and ``nerve memory status`` as real processes (REC-4, LOOM-4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway
from tests.support.processes import RunNerve, assert_one_line_error

COULD_NOT = "Memories could not be recalled"


def configure(tmp_path: Path, text: str) -> list[str]:
    """Write config.local.yaml and return the folder options every command gets."""
    config_dir = tmp_path / "config"
    config_dir.mkdir(exist_ok=True)
    (tmp_path / "workspace").mkdir(exist_ok=True)  # memory status refuses one that is not there
    (config_dir / "config.local.yaml").write_text(text, encoding="utf-8")
    return ["--config-dir", str(config_dir), "--workspace", str(tmp_path / "workspace")]


def loom_options(tmp_path: Path, url: str) -> list[str]:
    return configure(tmp_path, f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n")


class TestRecallCommand:
    def test_recall_prints_the_session_context_block_with_the_memories(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        gateway.app.store.remember("prefers <b>bold</b> summaries")
        result = run_nerve("memory", "recall", "s-1", *loom_options(tmp_path, gateway.base_url))
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0] == "<session-context>"
        assert lines[-1] == "</session-context>"
        assert any("prefers &lt;b&gt;bold&lt;/b&gt; summaries" in line for line in lines)

    def test_a_session_recalled_once_prints_the_same_block_again(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """REC-3: the CLI freezes in the state file, as the engine does."""
        options = loom_options(tmp_path, gateway.base_url)
        gateway.app.store.remember("first fact")
        first = run_nerve("memory", "recall", "s-1", "--json", *options)
        gateway.app.store.remember("second fact")
        again = run_nerve("memory", "recall", "s-1", "--json", *options)
        assert json.loads(again.stdout) == json.loads(first.stdout)
        assert json.loads(first.stdout)["items"] == ["first fact"]

    def test_without_a_gateway_the_block_says_memories_could_not_be_recalled(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        """REC-4: never 'no memories' when Loom was not asked."""
        options = configure(tmp_path, "memory:\n  backend: loom\n")
        result = run_nerve("memory", "recall", "s-1", *options)
        assert result.returncode == 0, result.stderr
        assert COULD_NOT in result.stdout
        report = json.loads(run_nerve("memory", "recall", "s-1", "--json", *options).stdout)
        assert (report["recalled"], report["source"]) == (False, None)

    def test_a_session_id_that_is_empty_is_one_line_and_exit_2(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        options = configure(tmp_path, "memory:\n  backend: loom\n")
        assert_one_line_error(run_nerve("memory", "recall", "", *options), "SESSION")

    def test_a_broken_configuration_is_one_line_and_exit_2(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        options = configure(tmp_path, "memory:\n  backend: lom\n")
        assert_one_line_error(run_nerve("memory", "recall", "s-1", *options), "memory.backend")


class TestStatusCommand:
    def test_status_json_shows_the_gateway_catalog_and_identity(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """LOOM-4."""
        options = loom_options(tmp_path, gateway.base_url)
        result = run_nerve("memory", "status", "--json", *options)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["available"] is True
        assert report["gateway_url"] == gateway.base_url
        assert report["catalog"]["lists_loom"] is True
        assert (report["identity"]["org"], report["identity"]["namespace"]) == ("dev", "agent")

    def test_status_text_names_the_breaker_and_the_last_error(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        gateway.app.faults.switch("policy")
        result = run_nerve("memory", "status", *loom_options(tmp_path, gateway.base_url))
        assert result.returncode == 0, result.stderr
        assert "breaker:\n  state: closed" in result.stdout
        assert "kind: the gateway's policy refused the call\n" in result.stdout  # FLEET-4

    def test_without_a_gateway_status_says_unavailable_and_why(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        options = configure(tmp_path, "memory:\n  backend: loom\n")
        report = json.loads(run_nerve("memory", "status", "--json", *options).stdout)
        assert report["available"] is False
        assert report["last_error"]["kind"] == "MemoryBackendUnavailable"


class TestUnderMemu:
    @pytest.mark.parametrize("command", [["recall", "s-1"], ["status"]])
    def test_memu_says_memory_is_kept_in_memu_and_exits_0(
        self, tmp_path: Path, run_nerve: RunNerve, command: list[str]
    ) -> None:
        options = configure(tmp_path, "memory:\n  backend: memu\n")
        result = run_nerve("memory", *command, *options)
        assert result.returncode == 0
        assert "memory is kept in memU" in result.stdout
        report = json.loads(run_nerve("memory", *command, "--json", *options).stdout)
        expected = {"backend": "memu", "kept_in": "memU"}
        if command == ["status"]:  # FLEET-4: status --json leads with its schema and status
            expected = {"schema": 1, "status": "not_loom", **expected}
        assert report == expected
