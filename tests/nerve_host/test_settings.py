"""Keys where Nerve reads them, and the keys Nerve must still learn (NERVE-8).

Nerve's own config loader, its key check and its ``nerve config validate --strict-keys`` run
against files the package writes; ``nerve_settings`` gives the engine the merged mapping.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost, nerve_is_patched
from tests.support.repo import REPO_ROOT

nerve_config = pytest.importorskip("nerve.config", reason=NO_NERVE)

from provisioner.config.local_file import store_embeddings_key  # noqa: E402
from provisioner.integrations.nerve import nerve_settings  # noqa: E402
from provisioner.runtime import LoomMemory  # noqa: E402
from provisioner.runtime.loom.settings import loom_values  # noqa: E402

CONFIG_PAGE = REPO_ROOT / "docs" / "config.md"
UNKNOWN_KEY = re.compile(r"^\[(ERR|WARN)\] .*unknown key '([^']+)'", re.M)


def keys_nerve_must_learn() -> set[str]:
    """The keys listed under "Keys Nerve must learn" in docs/config.md."""
    section = CONFIG_PAGE.read_text(encoding="utf-8").split("## Keys Nerve must learn", 1)[1]
    section = section.split("\n## ", 1)[0]
    return set(re.findall(r"^- `([a-z_.]+)`", section, re.M))


def loom_machine(machine: Machine, run_host: RunHost) -> None:
    """Nerve's own init, then Loom's keys in its machine-local file, as a platform sets them."""
    done = run_host("-c", str(machine.config_dir), "init", "--non-interactive", mounted=False)
    assert done.returncode == 0, done.stderr
    local = machine.config_dir / "config.local.yaml"
    data = yaml.safe_load(local.read_text(encoding="utf-8")) or {}
    data["memory"] = {
        **(data.get("memory") or {}),
        "backend": "loom",
        "loom": {"org": "acme", "namespace": "home", "sweep_concurrency": 3},
    }
    data["mcp_gateway_url"] = "http://127.0.0.1:8787"
    local.write_text(yaml.safe_dump(data), encoding="utf-8")


class TestNerveSettings:
    def test_loom_memory_builds_from_nerve_settings_of_nerves_own_files(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        loom_machine(machine, run_host)
        settings = nerve_settings()  # found through Nerve's pointer file
        values = loom_values(settings)
        assert (values.org, values.namespace, values.gateway_url) == (
            "acme",
            "home",
            "http://127.0.0.1:8787",
        )
        memory = LoomMemory.from_settings(settings, state_path=machine.home / "state.sqlite3")
        assert isinstance(memory, LoomMemory)
        assert settings["workspace"] == str(machine.workspace)
        assert settings["agent"] == yaml.safe_load(
            (machine.config_dir / "config.yaml").read_text(encoding="utf-8")
        ).get("agent", settings["agent"])  # Nerve's own keys are kept too

    def test_nerves_config_object_drops_the_keys_so_it_cannot_serve(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        """Why the mapping: Nerve's object has no memory.backend to read."""
        loom_machine(machine, run_host)
        with pytest.raises(ValueError):
            LoomMemory.from_settings(nerve_config.load_config(machine.config_dir))


class TestTheEmbeddingsKey:
    def test_nerve_reads_the_key_init_stores_and_warns_of_nothing(self, machine: Machine) -> None:
        store_embeddings_key(machine.config_dir, "sk-embeddings-test")
        loaded = nerve_config.load_config(machine.config_dir)
        assert loaded.openai_api_key == "sk-embeddings-test"
        merged = yaml.safe_load(
            (machine.config_dir / "config.local.yaml").read_text(encoding="utf-8")
        )
        assert nerve_config.validate_config_keys(merged) == []


class TestStrictKeysOnALockedRender:
    def test_nerves_validate_names_exactly_the_keys_the_docs_say_it_must_learn(
        self, machine: Machine, run_host: RunHost, run_package: RunHost
    ) -> None:
        workspace = machine.home / "locked"
        rendered = run_package(
            "render", "--backend", "loom", "--data", "lockdown=true", "--out", str(workspace)
        )
        assert rendered.returncode == 0, rendered.stderr
        for git in (["init", "-q"], ["remote", "add", "origin", "https://example.invalid/c.git"]):
            subprocess.run(["git", "-C", str(workspace), *git], check=True, timeout=60)
        validate = ("config", "validate", "--workspace", str(workspace), "--portable-only")
        strict = run_host("-c", str(machine.config_dir), *validate, "--strict-keys", mounted=False)
        errors = [line for line in strict.stdout.splitlines() if line.startswith("[ERR]")]
        if nerve_is_patched():  # the patch teaches Nerve the keys (NERVE-17)
            assert strict.returncode == 0, strict.stdout + strict.stderr
            assert UNKNOWN_KEY.findall(strict.stdout) == [] and errors == []
            return
        assert strict.returncode == 1, strict.stdout + strict.stderr
        assert {key for _, key in UNKNOWN_KEY.findall(strict.stdout)} == keys_nerve_must_learn()
        assert len(errors) == len(keys_nerve_must_learn()), errors
        lenient = run_host("-c", str(machine.config_dir), *validate, mounted=False)
        assert lenient.returncode == 0, lenient.stdout + lenient.stderr
        warned = {key for level, key in UNKNOWN_KEY.findall(lenient.stdout) if level == "WARN"}
        assert warned == keys_nerve_must_learn()


def test_the_page_lists_three_keys() -> None:
    assert keys_nerve_must_learn() == {"memory.backend", "memory.loom", "mcp_gateway_url"}
