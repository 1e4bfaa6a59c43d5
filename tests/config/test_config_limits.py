"""A configuration file costs a bounded amount to read, whoever wrote it (CONF-8, defect 1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provisioner.config.bounded_yaml import (
    MAX_ALIASES,
    MAX_BYTES,
    MAX_DEPTH,
    YamlLimitError,
    load_bounded,
)
from provisioner.config.loader import ConfigError, load_config
from tests.support.processes import assert_one_line_error

# Nine levels of nine aliases: 9**9 nodes once expanded, from a few hundred bytes.
ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]\n" for level in range(1, 10)
)
SELF_ALIAS = "memory: &loop\n  loom: *loop\n"
DEEP_NESTING = "[" * 900 + "]" * 900 + "\n"
DUPLICATE_KEY = "memory:\n  backend: memu\n  backend: loom\n"


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    path = tmp_path / "cfg"
    path.mkdir()
    return path


def init_with_local(run_nerve, config_dir: Path, text: str):
    (config_dir / "config.local.yaml").write_text(text)
    return run_nerve("init", "--workspace", "ws", "--config-dir", str(config_dir))


class TestHostileConfigThroughTheCli:
    def test_an_alias_bomb_is_refused_with_one_line_naming_the_file(self, run_nerve, config_dir):
        """CONF-8: the bomb is refused, not expanded (the process ends far within its timeout)."""
        result = init_with_local(run_nerve, config_dir, ALIAS_BOMB)
        assert_one_line_error(result, "config.local.yaml", "aliases")
        assert not (config_dir.parent / "ws").exists()

    def test_an_alias_to_its_own_node_is_refused(self, run_nerve, config_dir):
        """CONF-8: a self-reference would recurse forever; it is one line, no traceback."""
        result = init_with_local(run_nerve, config_dir, SELF_ALIAS)
        assert_one_line_error(result, "config.local.yaml", "*loop", "line 2")

    def test_nine_hundred_levels_of_nesting_are_refused(self, run_nerve, config_dir):
        """CONF-8: deep nesting is refused before Python's stack is at risk."""
        result = init_with_local(run_nerve, config_dir, DEEP_NESTING)
        assert_one_line_error(result, "config.local.yaml", f"deeper than {MAX_DEPTH}")

    def test_a_key_written_twice_names_the_key_and_both_lines(self, run_nerve, config_dir):
        """CONF-8: duplicate keys are an error, not a silent last-one-wins."""
        result = init_with_local(run_nerve, config_dir, DUPLICATE_KEY)
        assert_one_line_error(result, "config.local.yaml", "'backend'", "lines 2 and 3")

    def test_an_oversized_file_is_refused(self, run_nerve, config_dir):
        """CONF-8: size is bounded too."""
        result = init_with_local(run_nerve, config_dir, "# " + "x" * MAX_BYTES + "\n")
        assert_one_line_error(result, "config.local.yaml", str(MAX_BYTES))

    def test_a_fifo_in_place_of_a_config_file_does_not_hang(self, run_nerve, config_dir):
        """CONF-8: reading a FIFO would block forever; it is refused as not a regular file."""
        os.mkfifo(config_dir / "config.yaml")
        result = run_nerve("init", "--workspace", "ws", "--config-dir", str(config_dir))
        assert_one_line_error(result, "config.yaml", "not a regular file")

    def test_a_workspace_settings_file_gets_the_same_bounds(self, run_nerve, tmp_path):
        """CONF-8: the tracked settings.yaml is the agent's to edit: it is bounded the same."""
        settings = tmp_path / "ws" / "config" / "settings.yaml"
        settings.parent.mkdir(parents=True)
        settings.write_text(ALIAS_BOMB)
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "settings.yaml", "aliases")


class TestBoundedLoader:
    def test_ordinary_anchors_and_merge_keys_still_load(self):
        """A config that uses anchors within the bounds reads as before."""
        text = "base: &base {org: acme}\nmemory:\n  loom:\n    <<: *base\n    namespace: ada\n"
        assert load_bounded(text)["memory"]["loom"] == {"org": "acme", "namespace": "ada"}

    def test_more_aliases_than_the_limit_are_refused_even_when_small(self):
        """CONF-8: the alias count is bounded on its own."""
        text = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
        with pytest.raises(YamlLimitError, match="aliases"):
            load_bounded(text)

    def test_duplicate_keys_in_a_flow_mapping_are_refused(self):
        with pytest.raises(YamlLimitError, match="'a' appears twice"):
            load_bounded("{a: 1, a: 2}\n")

    def test_load_config_reports_the_limit_as_a_config_error(self, config_dir):
        """The loader's refusal reaches callers as the usual one-line ConfigError."""
        (config_dir / "config.yaml").write_text(SELF_ALIAS)
        with pytest.raises(ConfigError) as caught:
            load_config(config_dir)
        assert caught.value.path == config_dir / "config.yaml"
        assert caught.value.line == 2
