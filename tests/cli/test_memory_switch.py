"""``memory switch``: one instance's configuration switched to Loom in the file its
configuration is read from (NERVE-12, FLEET-7), on real configuration folders."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from provisioner.config.loader import load_config
from provisioner.config.paths import POINTER_FILE
from tests.support.processes import RunNerve

GATEWAY = "http://127.0.0.1:8787"


def nerve_instance(tmp_path: Path) -> tuple[Path, Path]:
    """An instance as Nerve's own init leaves it: a configuration folder of its own, named by
    the pointer file in Nerve's state folder (``~/.nerve``), and that state folder."""
    home = tmp_path / "home"
    state = home / ".nerve"
    config_dir = home / "nerve-config"
    state.mkdir(parents=True)
    config_dir.mkdir()
    (config_dir / "config.yaml").write_text("timezone: UTC\n", encoding="utf-8")
    (state / POINTER_FILE).write_text(str(config_dir), encoding="utf-8")
    return state, config_dir


class TestWhereTheSwitchGoes:
    def test_an_instance_nerves_init_set_up_is_switched_in_the_folder_nerve_reads(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        state, config_dir = nerve_instance(tmp_path)
        done = run_nerve("memory", "switch", "--gateway", GATEWAY + "/")
        assert done.returncode == 0, done.stderr
        local = config_dir / "config.local.yaml"
        assert f"written in {local}" in done.stdout and done.stdout.count("\n") == 1
        assert not (state / "config.local.yaml").exists()  # nothing where Nerve does not read
        config = load_config(config_dir, None)
        assert (config.memory_backend, config.mcp_gateway_url) == ("loom", GATEWAY)

    def test_every_other_key_is_kept_and_the_instances_own_gateway_is_never_replaced(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        _state, config_dir = nerve_instance(tmp_path)
        local = config_dir / "config.local.yaml"
        local.write_text(
            "openai_api_key: sk-kept\nmcp_gateway_url: http://gw.internal:9000\n", "utf-8"
        )
        done = run_nerve("memory", "switch", "--gateway", GATEWAY, "--json")
        answer = json.loads(done.stdout)
        assert (answer["written"], answer["exit_status"]) == (["memory.backend"], 0)
        kept = yaml.safe_load(local.read_text(encoding="utf-8"))
        assert kept == {
            "openai_api_key": "sk-kept",
            "mcp_gateway_url": "http://gw.internal:9000",
            "memory": {"backend": "loom"},
        }
        again = run_nerve("memory", "switch")
        assert again.returncode == 0 and again.stdout.startswith("already switched:")


class TestRefusals:
    def test_no_gateway_anywhere_is_one_line_and_nothing_written(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        _state, config_dir = nerve_instance(tmp_path)
        done = run_nerve("memory", "switch")
        assert done.returncode == 2 and done.stderr.count("\n") == 1
        assert "no mcp_gateway_url, and no --gateway given" in done.stderr
        assert not (config_dir / "config.local.yaml").exists()

    def test_a_gateway_with_a_credential_is_refused_without_echoing_it(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        nerve_instance(tmp_path)
        for url in ("http://ada:secret@gw/", "http://gw/?token=secret", "http://gw/#secret"):
            done = run_nerve("memory", "switch", "--gateway", url)
            assert done.returncode == 2, url
            assert "secret" not in done.stderr and "is not a gateway URL" in done.stderr

    def test_a_locked_instance_is_the_platforms_to_switch(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        workspace = tmp_path / "ws"
        (workspace / "config").mkdir(parents=True)
        (workspace / "config" / "settings.yaml").write_text("lockdown: true\n", "utf-8")
        _state, config_dir = nerve_instance(tmp_path)
        done = run_nerve(
            "memory", "switch", "--gateway", GATEWAY, "--workspace", str(workspace), "--json"
        )
        answer = json.loads(done.stdout)
        assert done.returncode == 1 and answer["locked"] is True and answer["written"] == []
        assert "NERVE_MEMORY_BACKEND=loom" in answer["line"]
        assert not (config_dir / "config.local.yaml").exists()
