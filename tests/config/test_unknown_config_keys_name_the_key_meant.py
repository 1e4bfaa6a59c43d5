"""An unknown top-level configuration key warns, naming the key it probably meant (FLEET-4).

``memroy:`` used to load silently: memory stayed at its defaults (memU) and nothing said why.
Nerve's own top-level keys, which this package carries through unchecked, never warn.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.config.checks import NERVE_TOP_LEVEL_KEYS, TOP_LEVEL_KEYS
from provisioner.config.loader import load_config

REPO_ROOT = Path(__file__).resolve().parents[2]


def nerve_source() -> Path:
    return Path(os.environ.get("NERVE_SOURCE") or REPO_ROOT.parent / "shared" / "nerve")


def loaded(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    config_dir = tmp_path / "cfg"
    config_dir.mkdir(exist_ok=True)
    path = config_dir / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(config_dir, env={}), path


class TestATypoAtTheTopLevel:
    def test_memroy_warns_and_names_memory(self, tmp_path: Path) -> None:
        config, path = loaded(tmp_path, "memroy:\n  backend: loom\n")
        assert config.memory_backend == "memu"
        assert config.warnings == (f"{path}: memroy: unknown key, ignored; did you mean memory?",)

    def test_a_misspelt_nerve_key_names_nerve_s_key(self, tmp_path: Path) -> None:
        config, path = loaded(tmp_path, "mcp_gatway_url: http://127.0.0.1:1\n")
        assert config.warnings == (
            f"{path}: mcp_gatway_url: unknown key, ignored; did you mean mcp_gateway_url?",
        )

    def test_a_key_close_to_nothing_warns_without_a_guess(self, tmp_path: Path) -> None:
        config, path = loaded(tmp_path, "zzz: 1\n")
        assert config.warnings == (f"{path}: zzz: unknown key, ignored",)

    def test_a_typo_under_memory_names_the_key_meant_too(self, tmp_path: Path) -> None:
        config, path = loaded(tmp_path, "memory:\n  bakend: loom\n")
        (warning,) = config.warnings
        assert warning.startswith(
            f"{path}: memory.bakend: unknown key, ignored; did you mean backend? known keys"
        )

    def test_doctor_shows_it_as_a_warn_named_by_the_key(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        loaded(tmp_path, "memroy:\n  backend: loom\n")
        (tmp_path / "ws").mkdir()
        argv = ["doctor", "--offline", "--json", "--config-dir", str(tmp_path / "cfg")]
        assert main([*argv, "--workspace", str(tmp_path / "ws")]) in (0, 1)
        checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
        warning = checks["config.warning.memroy"]
        assert warning["status"] == "WARN"
        assert warning["message"].endswith("; did you mean memory?")


class TestKnownKeys:
    def test_every_key_nerve_or_this_package_reads_loads_without_a_warning(
        self, tmp_path: Path
    ) -> None:
        text = "".join(f"{key}: null\n" for key in (*NERVE_TOP_LEVEL_KEYS, *TOP_LEVEL_KEYS))
        config, _path = loaded(tmp_path, text.replace("lockdown: null\n", ""))
        assert config.warnings == ()

    def test_nerve_s_example_configuration_loads_without_an_unknown_top_level_key(
        self, tmp_path: Path
    ) -> None:
        example = nerve_source() / "config.example.yaml"
        if not example.is_file():
            pytest.skip("Nerve's source is not beside this checkout (set NERVE_SOURCE)")
        config, _path = loaded(tmp_path, example.read_text(encoding="utf-8"))
        top_level = [w for w in config.warnings if "known keys under" not in w]
        assert [w for w in top_level if ": unknown key" in w] == []
