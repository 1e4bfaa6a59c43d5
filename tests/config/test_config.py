"""Tests of the configuration loader (SPEC §4, CONF-1…CONF-7), on real files in a temp dir."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from provisioner.config.checks import KeyChecker
from provisioner.config.loader import (
    SKIPPED_ABSENT,
    SKIPPED_LOCKDOWN,
    Config,
    ConfigError,
    configured_backend,
    known_keys,
    load_config,
)
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.settings import (
    SWEEP_CONCURRENCY_DEFAULT,
    SWEEP_CONCURRENCY_MAX,
    loom_values,
)
from provisioner.templating.backends import BACKEND_NAMES, LOOM_KEYS, NERVE_MEMORY_KEYS


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    path = tmp_path / "etc"
    path.mkdir()
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    (path / "config").mkdir(parents=True)
    return path


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def settings(workspace: Path, text: str) -> Path:
    return write(workspace / "config" / "settings.yaml", text)


def shared(config_dir: Path, text: str) -> Path:
    return write(config_dir / "config.yaml", text)


def local(config_dir: Path, text: str) -> Path:
    return write(config_dir / "config.local.yaml", text)


def load(config_dir: Path, workspace: Path | None = None, **env: str) -> Config:
    return load_config(config_dir, workspace, env=env)


def load_error(config_dir: Path, workspace: Path | None = None, **env: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config(config_dir, workspace, env=env)
    return caught.value


def assert_one_line(error: ConfigError, path: Path, key: str | None) -> str:
    """The CONF-7 shape: one line, naming the file and the key."""
    text = str(error)
    assert "\n" not in text and "\r" not in text
    assert text.startswith(f"{path}: ")
    assert error.path == path
    assert error.key == key
    if key is not None:
        assert f": {key}: " in text
    return text


LOCKED_SETTINGS = """\
    lockdown: true
    memory:
      backend: ${NERVE_MEMORY_BACKEND:-memu}
      loom:
        dashboard_url: ${LOOM_DASHBOARD_URL:-}
    mcp_gateway_url: ${NERVE_MCP_BASE_URL:-}
"""


class TestLayering:
    def test_no_files_at_all_give_the_defaults(self, config_dir, workspace):
        """CONF-1: missing files are fine; nothing set means memU, no gateway."""
        config = load(config_dir, workspace)
        assert config.memory_backend == "memu"
        assert config.mcp_gateway_url is None
        assert config.lockdown is False
        assert config.data == {}
        assert [(f.layer, f.read, f.skipped) for f in config.files] == [
            ("settings", False, SKIPPED_ABSENT),
            ("config", False, SKIPPED_ABSENT),
            ("local", False, SKIPPED_ABSENT),
        ]

    def test_a_missing_config_dir_is_the_same_as_empty(self, tmp_path):
        """CONF-1: a configuration directory that does not exist yet is not an error."""
        config = load(tmp_path / "not-there")
        assert config.memory_backend == "memu"
        assert all(not f.read for f in config.files)

    def test_an_empty_file_is_an_empty_mapping(self, config_dir):
        """CONF-1: an empty (or comment-only) file is read and counts as an empty mapping."""
        write(config_dir / "config.yaml", "")
        local(config_dir, "# nothing here yet\n")
        config = load(config_dir)
        assert config.data == {}
        assert [f.read for f in config.files] == [True, True]

    def test_config_yaml_outranks_settings_yaml(self, config_dir, workspace):
        """CONF-1: config.yaml is laid over the tracked settings."""
        settings(workspace, "memory:\n  backend: memu\n")
        shared(config_dir, "memory:\n  backend: loom\n")
        assert load(config_dir, workspace).memory_backend == "loom"

    def test_config_local_outranks_config_yaml(self, config_dir, workspace):
        """CONF-1: the machine-local file outranks both other layers."""
        settings(workspace, "memory:\n  backend: loom\n")
        shared(config_dir, "memory:\n  backend: loom\n")
        local(config_dir, "memory:\n  backend: memu\n")
        assert load(config_dir, workspace).memory_backend == "memu"

    def test_mappings_merge_key_by_key_across_layers(self, config_dir, workspace):
        """CONF-1: a higher layer changes only the keys it names inside a mapping."""
        settings(workspace, "agent:\n  name: Ada\n  timezone: UTC\n")
        local(config_dir, "agent:\n  timezone: Europe/Berlin\n")
        data = load(config_dir, workspace).data
        assert data["agent"] == {"name": "Ada", "timezone": "Europe/Berlin"}

    def test_lists_are_replaced_not_concatenated(self, config_dir):
        """CONF-1: a list in a higher layer replaces the lower one whole."""
        shared(config_dir, "channels: [a, b, c]\n")
        local(config_dir, "channels: [z]\n")
        assert load(config_dir).data["channels"] == ["z"]

    def test_a_scalar_replaces_a_mapping_and_the_other_way_round(self, config_dir):
        """CONF-1: only two mappings merge; any other pair is replaced by the higher layer."""
        shared(config_dir, "a:\n  x: 1\nb: plain\n")
        local(config_dir, "a: flat\nb:\n  y: 2\n")
        assert load(config_dir).data == {"a": "flat", "b": {"y": 2}}

    def test_settings_yaml_is_not_considered_without_a_workspace(self, config_dir):
        """CONF-1: with no workspace only the two files of the configuration directory count."""
        config = load(config_dir)
        assert [f.layer for f in config.files] == ["config", "local"]

    def test_sources_name_the_file_whose_value_won(self, config_dir, workspace):
        """CONF-1, DOC-1: every leaf key points at the file that set it, for nerve doctor."""
        tracked = settings(workspace, "agent:\n  name: Ada\n  timezone: UTC\n")
        machine = local(config_dir, "agent:\n  timezone: Europe/Berlin\nchannels: [a]\n")
        config = load(config_dir, workspace)
        assert dict(config.sources) == {
            "agent.name": tracked,
            "agent.timezone": machine,
            "channels": machine,
        }
        assert config.source_of("agent") == machine

    def test_a_replaced_mapping_leaves_no_stale_sources(self, config_dir):
        """CONF-1: when a scalar replaces a mapping, the mapping's old leaves are forgotten."""
        shared(config_dir, "a:\n  x: 1\n  y: 2\n")
        machine = local(config_dir, "a: flat\n")
        assert dict(load(config_dir).sources) == {"a": machine}

    def test_files_record_which_layers_were_read(self, config_dir, workspace):
        """CONF-1, DOC-1: each considered file says whether it was read, and its path."""
        tracked = settings(workspace, "x: 1\n")
        config = load(config_dir, workspace)
        assert [(f.path, f.read) for f in config.files] == [
            (tracked, True),
            (config_dir / "config.yaml", False),
            (config_dir / "config.local.yaml", False),
        ]

    def test_paths_may_be_given_as_strings(self, config_dir, workspace):
        """CONF-1: config_dir and workspace accept str as well as Path."""
        settings(workspace, "memory:\n  backend: loom\n")
        assert load_config(str(config_dir), str(workspace), env={}).memory_backend == "loom"


class TestExpansion:
    def test_a_set_variable_is_substituted(self, config_dir):
        """CONF-2: ${VAR} takes the variable's value."""
        shared(config_dir, "greeting: hello ${WHO}!\n")
        assert load(config_dir, WHO="world").data["greeting"] == "hello world!"

    def test_a_required_variable_set_to_empty_gives_an_empty_string(self, config_dir):
        """CONF-2: only an unset ${VAR} refuses; a set but empty one expands to nothing."""
        shared(config_dir, "x: a${EMPTY}b\n")
        assert load(config_dir, EMPTY="").data["x"] == "ab"

    def test_a_default_is_used_when_the_variable_is_unset(self, config_dir):
        """CONF-2: ${VAR:-default} falls back when VAR is not in the environment."""
        shared(config_dir, "x: ${NOT_SET:-fallback}\n")
        assert load(config_dir).data["x"] == "fallback"

    def test_a_default_is_used_when_the_variable_is_empty(self, config_dir):
        """CONF-2: ${VAR:-default} falls back when VAR is set but empty."""
        shared(config_dir, "x: ${EMPTY:-fallback}\n")
        assert load(config_dir, EMPTY="").data["x"] == "fallback"

    def test_a_set_variable_wins_over_its_default(self, config_dir):
        """CONF-2: the default is only for unset or empty variables."""
        shared(config_dir, "x: ${SET:-fallback}\n")
        assert load(config_dir, SET="value").data["x"] == "value"

    def test_an_empty_default_gives_an_empty_string(self, config_dir):
        """CONF-2: ${VAR:-} is the way to say "empty unless set"."""
        shared(config_dir, "x: ${NOT_SET:-}\n")
        assert load(config_dir).data["x"] == ""

    def test_double_dollar_is_a_literal_dollar(self, config_dir):
        """CONF-2: $$ gives one $, also in front of a brace, which is how to write ${ literally."""
        shared(config_dir, "price: 5$$\nliteral: $${HOME}\n")
        data = load(config_dir, HOME="/home/ada").data
        assert data["price"] == "5$"
        assert data["literal"] == "${HOME}"

    def test_a_lone_dollar_is_left_as_it_is(self, config_dir):
        """CONF-2: a $ not followed by { or $ is kept, as is a trailing one."""
        shared(config_dir, "a: $HOME costs $5\nb: end$\n")
        data = load(config_dir, HOME="/home/ada").data
        assert data == {"a": "$HOME costs $5", "b": "end$"}

    def test_keys_are_not_expanded(self, config_dir):
        """CONF-2: only string values expand; a key that looks like a reference stays."""
        shared(config_dir, "${KEY}: value\n")
        assert load(config_dir, KEY="other").data == {"${KEY}": "value"}

    def test_values_in_nested_mappings_and_lists_are_expanded(self, config_dir):
        """CONF-2: expansion reaches every string, however deep."""
        shared(config_dir, 'a:\n  b:\n    c: ${V}\nlist: ["${V}", x]\n')
        data = load(config_dir, V="v").data
        assert data == {"a": {"b": {"c": "v"}}, "list": ["v", "x"]}

    def test_non_string_values_are_left_alone(self, config_dir):
        """CONF-2: numbers, booleans and nulls are not turned into strings."""
        shared(config_dir, "n: 3\nf: 1.5\nb: true\nz: null\n")
        assert load(config_dir).data == {"n": 3, "f": 1.5, "b": True, "z": None}

    def test_the_environment_defaults_to_the_process_environment(self, config_dir, monkeypatch):
        """CONF-2: without env=, os.environ is used."""
        monkeypatch.setenv("NERVE_TEST_CONFIG_VALUE", "from-process")
        shared(config_dir, "x: ${NERVE_TEST_CONFIG_VALUE}\n")
        assert load_config(config_dir).data["x"] == "from-process"

    def test_an_unset_required_variable_refuses_to_load(self, config_dir, workspace):
        """CONF-2: a bare ${VAR} that is unset is an error naming the file, key and variable."""
        tracked = settings(workspace, "memory:\n  backend: ${NERVE_MEMORY_BACKEND}\n")
        error = load_error(config_dir, workspace)
        text = assert_one_line(error, tracked, "memory.backend")
        assert "${NERVE_MEMORY_BACKEND} is not set" in text
        assert error.missing == ("NERVE_MEMORY_BACKEND",)

    def test_every_missing_variable_is_named_in_one_line(self, config_dir, workspace):
        """CONF-2: all unset variables of all files are named at once, each with file and key."""
        tracked = settings(workspace, "a: ${ONE}\n")
        machine = local(config_dir, "b:\n  c: ${TWO} and ${THREE}\nd: ['${ONE}']\n")
        error = load_error(config_dir, workspace)
        text = assert_one_line(error, tracked, "a")
        assert f"{tracked}: a: ${{ONE}} is not set" in text
        assert f"{machine}: b.c: ${{TWO}}, ${{THREE}} are not set" in text
        assert f"{machine}: d[0]: ${{ONE}} is not set" in text
        assert error.missing == ("ONE", "TWO", "THREE")

    def test_the_error_names_the_file_that_holds_the_reference(self, config_dir, workspace):
        """CONF-2: files expand one by one before merging, so the right file is blamed."""
        settings(workspace, "mcp_gateway_url: http://gw:8787\n")
        machine = local(config_dir, "mcp_gateway_url: ${NERVE_MCP_BASE_URL}\n")
        assert_one_line(load_error(config_dir, workspace), machine, "mcp_gateway_url")

    def test_a_reference_in_an_overridden_value_still_counts(self, config_dir):
        """CONF-2: expansion precedes merging, so an unset ${VAR} fails even if overridden."""
        lower = shared(config_dir, "x: ${GONE}\n")
        local(config_dir, "x: fixed\n")
        assert_one_line(load_error(config_dir), lower, "x")

    @pytest.mark.parametrize("value", ["${", "${UNCLOSED", "${}", "${1ABC}", "${A:b}", "${A-b}"])
    def test_a_malformed_reference_is_an_error(self, config_dir, value):
        """CONF-2, CONF-7: a ${ that is no reference is refused, naming the forms allowed."""
        path = shared(config_dir, f"x: '{value}'\n")
        text = assert_one_line(load_error(config_dir), path, "x")
        assert "not a variable reference" in text
        assert "${NAME:-default}" in text


class TestLockdown:
    def test_lockdown_in_settings_skips_config_local(self, config_dir, workspace):
        """CONF-3: under lockdown the machine-local file is not read, and is listed as skipped."""
        settings(workspace, "lockdown: true\nmemory:\n  backend: memu\n")
        local(config_dir, "memory:\n  backend: loom\n")
        config = load(config_dir, workspace)
        assert config.lockdown is True
        assert config.memory_backend == "memu"
        skipped = config.files[-1]
        assert (skipped.path, skipped.read, skipped.skipped) == (
            config_dir / "config.local.yaml",
            False,
            SKIPPED_LOCKDOWN,
        )

    def test_nerve_lockdown_1_turns_lockdown_on(self, config_dir):
        """CONF-3: NERVE_LOCKDOWN=1 locks an instance whose settings do not."""
        local(config_dir, "memory:\n  backend: loom\n")
        config = load(config_dir, NERVE_LOCKDOWN="1")
        assert config.lockdown is True
        assert config.memory_backend == "memu"

    @pytest.mark.parametrize("value", ["0", "false", ""])
    def test_nerve_lockdown_cannot_turn_lockdown_off(self, config_dir, workspace, value):
        """CONF-3: the variable can only turn lockdown on; settings.yaml's true stays."""
        settings(workspace, "lockdown: true\n")
        local(config_dir, "memory:\n  backend: loom\n")
        config = load(config_dir, workspace, NERVE_LOCKDOWN=value)
        assert config.lockdown is True
        assert config.memory_backend == "memu"

    def test_settings_cannot_turn_off_what_nerve_lockdown_turned_on(self, config_dir, workspace):
        """CONF-3: NERVE_LOCKDOWN=1 wins over `lockdown: false` in the tracked settings."""
        settings(workspace, "lockdown: false\n")
        local(config_dir, "memory:\n  backend: loom\n")
        config = load(config_dir, workspace, NERVE_LOCKDOWN="1")
        assert config.lockdown is True
        assert config.files[-1].skipped == SKIPPED_LOCKDOWN

    def test_an_unclear_nerve_lockdown_value_warns(self, config_dir):
        """CONF-3, CONF-7: a value that is neither on nor off leaves lockdown alone, with a line."""
        config = load(config_dir, NERVE_LOCKDOWN="maybe")
        assert config.lockdown is False
        assert any(w.startswith("NERVE_LOCKDOWN: 'maybe'") for w in config.warnings)

    def test_a_broken_config_local_is_never_opened_under_lockdown(self, config_dir, workspace):
        """CONF-3: lockdown does not read the file at all, so not even its syntax matters."""
        settings(workspace, "lockdown: true\n")
        local(config_dir, "memory: [unclosed\nx: ${UNSET}\n")
        assert load(config_dir, workspace).lockdown is True

    def test_config_yaml_is_still_read_under_lockdown(self, config_dir, workspace):
        """CONF-3: only the machine-local file is skipped."""
        settings(workspace, "lockdown: true\n")
        shared(config_dir, "memory:\n  backend: loom\n")
        assert load(config_dir, workspace).memory_backend == "loom"

    def test_lockdown_outside_settings_yaml_is_ignored_with_a_warning(self, config_dir):
        """CONF-3: lockdown is the tracked settings' decision, not the configuration dir's."""
        path = shared(config_dir, "lockdown: true\n")
        local(config_dir, "memory:\n  backend: loom\n")
        config = load(config_dir)
        assert config.lockdown is False
        assert config.memory_backend == "loom"
        assert any(w.startswith(f"{path}: lockdown: ignored here") for w in config.warnings)

    def test_lockdown_may_come_from_a_variable_in_settings(self, config_dir, workspace):
        """CONF-3: `lockdown: ${VAR:-false}` gives the word true or false, which counts."""
        settings(workspace, "lockdown: ${LOCK:-false}\n")
        local(config_dir, "memory:\n  backend: loom\n")
        assert load(config_dir, workspace).lockdown is False
        assert load(config_dir, workspace, LOCK="true").lockdown is True

    def test_a_non_boolean_lockdown_is_an_error(self, config_dir, workspace):
        """CONF-3, CONF-7: lockdown must be true or false."""
        tracked = settings(workspace, "lockdown: sometimes\n")
        text = assert_one_line(load_error(config_dir, workspace), tracked, "lockdown")
        assert "'sometimes' is not a boolean; expected true or false" in text

    def test_locked_settings_load_without_the_variables(self, config_dir, workspace):
        """CONF-3: unset variables mean memU, no gateway, no dashboard link."""
        settings(workspace, LOCKED_SETTINGS)
        config = load(config_dir, workspace)
        assert (config.lockdown, config.memory_backend) == (True, "memu")
        assert config.mcp_gateway_url is None
        assert config.loom.dashboard_url is None
        assert config.warnings == ()

    def test_locked_settings_load_with_empty_variables(self, config_dir, workspace):
        """CONF-3: empty variables (an EnvironmentFile with blank values) mean the same."""
        settings(workspace, LOCKED_SETTINGS)
        config = load(
            config_dir,
            workspace,
            NERVE_MEMORY_BACKEND="",
            NERVE_MCP_BASE_URL="",
            LOOM_DASHBOARD_URL="",
        )
        assert (config.memory_backend, config.mcp_gateway_url) == ("memu", None)
        assert config.loom.dashboard_url is None
        assert config.warnings == ()

    def test_locked_settings_load_with_the_variables(self, config_dir, workspace):
        """CONF-3: the service's environment switches a locked instance to Loom."""
        settings(workspace, LOCKED_SETTINGS)
        config = load(
            config_dir,
            workspace,
            NERVE_MEMORY_BACKEND="loom",
            NERVE_MCP_BASE_URL="http://127.0.0.1:8787/",
            LOOM_DASHBOARD_URL="https://loom.example.com/ns/ada",
        )
        assert (config.lockdown, config.memory_backend) == (True, "loom")
        assert config.mcp_gateway_url == "http://127.0.0.1:8787"
        assert config.loom.dashboard_url == "https://loom.example.com/ns/ada"


class TestBackendChoice:
    def test_the_default_backend_is_memu(self, config_dir):
        """CONF-4: with no memory.backend, memU."""
        shared(config_dir, "memory:\n  memu:\n    anything: 1\n")
        assert load(config_dir).memory_backend == "memu"

    @pytest.mark.parametrize("name", BACKEND_NAMES)
    def test_each_registered_backend_is_accepted(self, config_dir, name):
        """CONF-4: memu and loom are the choices."""
        shared(config_dir, f"memory:\n  backend: {name}\n")
        assert load(config_dir).memory_backend == name

    def test_an_empty_backend_means_memu(self, config_dir):
        """CONF-3, CONF-4: `backend:` with nothing, or an empty string, is the default."""
        shared(config_dir, "memory:\n  backend:\n")
        local(config_dir, "other: 1\n")
        assert load(config_dir).memory_backend == "memu"
        shared(config_dir, "memory:\n  backend: ''\n")
        assert load(config_dir).memory_backend == "memu"

    def test_an_unknown_backend_names_the_value_and_the_choices(self, config_dir):
        """CONF-4, CONF-7: the exact one-line message."""
        path = local(config_dir, "memory:\n  backend: foo\n")
        error = load_error(config_dir)
        assert str(error) == (
            f"{path}: memory.backend: 'foo' is not a memory backend; expected one of: memu, loom"
        )

    @pytest.mark.parametrize("value", ["5", "true", "[loom]", "{name: loom}", "Loom"])
    def test_a_backend_that_is_not_a_registered_name_is_refused(self, config_dir, value):
        """CONF-4: numbers, booleans, lists, mappings and wrong case are all refused."""
        path = shared(config_dir, f"memory:\n  backend: {value}\n")
        text = assert_one_line(load_error(config_dir), path, "memory.backend")
        assert "expected one of: memu, loom" in text

    def test_the_backend_is_not_read_from_the_environment(self, config_dir):
        """CONF-4: NERVE_MEMORY_BACKEND only counts through a ${…} reference in a file."""
        shared(config_dir, "memory: {}\n")
        assert load(config_dir, NERVE_MEMORY_BACKEND="loom").memory_backend == "memu"

    def test_memory_must_be_a_mapping(self, config_dir):
        """CONF-7: `memory` that is a list or a string is refused."""
        path = shared(config_dir, "memory: [loom]\n")
        text = assert_one_line(load_error(config_dir), path, "memory")
        assert "is a list; expected a mapping" in text

    def test_an_unknown_key_under_memory_warns_but_loads(self, config_dir):
        """CONF-7: a typo under memory is a warning naming the file and the key."""
        path = shared(config_dir, "memory:\n  bakend: loom\n")
        config = load(config_dir)
        assert config.memory_backend == "memu"
        (warning,) = config.warnings
        assert warning.startswith(f"{path}: memory.bakend: unknown key")
        assert "backend, loom, memu" in warning

    def test_configured_backend_is_none_when_no_file_names_one(self, config_dir):
        """INIT-2: init falls back to memU only when nothing names a backend."""
        shared(config_dir, "memory: {}\n")
        assert configured_backend(config_dir, env={}) is None
        local(config_dir, "memory:\n  backend: ${NOT_SET:-}\n")
        assert configured_backend(config_dir, env={}) is None

    def test_configured_backend_follows_the_expanded_configuration(self, config_dir, workspace):
        """INIT-2, CONF-2: the name a file gives, after expansion."""
        settings(workspace, "memory:\n  backend: ${NERVE_MEMORY_BACKEND:-memu}\n")
        assert configured_backend(config_dir, workspace, env={}) == "memu"
        env = {"NERVE_MEMORY_BACKEND": "loom"}
        assert configured_backend(config_dir, workspace, env=env) == "loom"


NERVES_MEMORY_BLOCK = """\
    memory:
      backend: {backend}
      recall_model: claude-sonnet-4-6
      memorize_model: claude-sonnet-4-6
      fast_model: claude-haiku-4-5
      embed_model: text-embedding-3-small
      sqlite_dsn: sqlite:////home/ada/.nerve/memu.sqlite
      semantic_dedup_threshold: 0.9
      knowledge_filter: true
      categories:
        - name: people
          description: who is who
        - name: projects
    """


class TestNervesOwnMemoryKeys:
    """NERVE-5, CONF-7: the keys Nerve itself reads under memory are known, and left alone."""

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    def test_nerves_own_keys_load_without_a_warning(self, config_dir, backend):
        shared(config_dir, NERVES_MEMORY_BLOCK.format(backend=backend))
        config = load(config_dir)
        assert config.memory_backend == backend
        assert config.warnings == ()

    def test_their_values_are_carried_through_as_written(self, config_dir):
        """Unchecked: values the loader has no rule for pass to Nerve, whatever they are."""
        shared(config_dir, NERVES_MEMORY_BLOCK.format(backend="loom"))
        local(config_dir, "memory:\n  semantic_dedup_threshold: high\n  knowledge_filter: 3\n")
        config = load(config_dir)
        memory = config.data["memory"]
        assert memory["categories"] == [
            {"name": "people", "description": "who is who"},
            {"name": "projects"},
        ]
        assert memory["semantic_dedup_threshold"] == "high"
        assert memory["knowledge_filter"] == 3
        assert memory["fast_model"] == "claude-haiku-4-5"
        assert config.warnings == ()

    def test_an_unknown_key_beside_them_still_warns(self, config_dir):
        path = shared(config_dir, NERVES_MEMORY_BLOCK.format(backend="memu") + "  recal_model: x\n")
        config = load(config_dir)
        (warning,) = config.warnings
        assert warning.startswith(f"{path}: memory.recal_model: unknown key, ignored")
        assert "recall_model" in warning

    def test_the_known_keys_name_each_of_them_once(self):
        """The docs are held to known_keys(); Nerve's keys are listed there, once each."""
        keys = known_keys()
        for key in NERVE_MEMORY_KEYS:
            assert keys.count(f"memory.{key}") == 1


def loom_config(config_dir: Path, loom_block: str) -> Path:
    """A config.yaml choosing Loom, with ``loom_block`` as the memory.loom mapping."""
    block = textwrap.indent(textwrap.dedent(loom_block), "    ")
    return shared(config_dir, f"memory:\n  backend: loom\n  loom:\n{block}")


class TestLoomSettings:
    def test_org_and_namespace_are_kept_when_valid(self, config_dir):
        """CONF-5: overrides that follow Loom's naming are kept."""
        loom_config(config_dir, "org: acme\nnamespace: ada_home-2\n")
        loom = load(config_dir).loom
        assert (loom.org, loom.namespace) == ("acme", "ada_home-2")

    def test_org_and_namespace_default_to_none(self, config_dir):
        """CONF-5: without overrides Loom resolves both from the gateway connection."""
        shared(config_dir, "memory:\n  backend: loom\n")
        loom = load(config_dir).loom
        assert (loom.org, loom.namespace, loom.dashboard_url) == (None, None, None)

    def test_empty_overrides_mean_none(self, config_dir):
        """CONF-5: `${LOOM_ORG:-}` left empty is no override, not a bad name."""
        loom_config(config_dir, "org: ${LOOM_ORG:-}\nnamespace:\n")
        loom = load(config_dir).loom
        assert (loom.org, loom.namespace) == (None, None)

    def test_a_name_of_63_characters_is_accepted(self, config_dir):
        """CONF-5: 63 is the longest name."""
        name = "a" + "b" * 62
        loom_config(config_dir, f"namespace: {name}\n")
        assert load(config_dir).loom.namespace == name

    @pytest.mark.parametrize("key", ["org", "namespace"])
    @pytest.mark.parametrize(
        "value",
        [
            "'Bad Name'",
            "Acme",
            "1team",
            "-team",
            "_team",
            "a.b",
            "a" * 64,
            "5",
            "[a]",
            '"ab\\n"',
        ],
    )
    def test_a_name_against_loom_naming_is_refused(self, config_dir, key, value):
        """CONF-5, CONF-7: one line naming the value and the rule."""
        path = loom_config(config_dir, f"{key}: {value}\n")
        text = assert_one_line(load_error(config_dir), path, f"memory.loom.{key}")
        assert "is not a Loom name; expected 1 to 63 characters of a-z, 0-9" in text
        assert "starting with a letter" in text

    def test_loom_settings_are_not_checked_under_memu(self, config_dir):
        """CONF-5: memory.loom is only looked at while the backend is loom."""
        shared(config_dir, "memory:\n  loom:\n    namespace: Bad Name\n    extra: 1\n")
        config = load(config_dir)
        assert config.memory_backend == "memu"
        assert config.loom.namespace is None
        assert config.warnings == ()

    def test_a_non_mapping_memory_loom_is_ignored_under_memu(self, config_dir):
        """CONF-5: not even its shape is checked under memU."""
        shared(config_dir, "memory:\n  loom: [x]\n")
        assert load(config_dir).memory_backend == "memu"

    def test_memory_loom_must_be_a_mapping_under_loom(self, config_dir):
        """CONF-5, CONF-7: a list where the Loom settings belong is refused."""
        path = shared(config_dir, "memory:\n  backend: loom\n  loom: [x]\n")
        text = assert_one_line(load_error(config_dir), path, "memory.loom")
        assert "is a list; expected a mapping" in text

    @pytest.mark.parametrize(
        "url", ["https://loom.example.com/ns/ada", "http://10.0.0.5:3000", "HTTPS://Loom.Example"]
    )
    def test_an_absolute_http_dashboard_url_is_kept(self, config_dir, url):
        """CONF-5: an absolute http or https URL with a host is the link."""
        loom_config(config_dir, f"dashboard_url: '{url}'\n")
        config = load(config_dir)
        assert config.loom.dashboard_url == url
        assert config.warnings == ()

    @pytest.mark.parametrize(
        "value",
        [
            "'javascript:alert(1)'",
            "/loom/dashboard",
            "loom.example.com",
            "ftp://loom.example.com",
            "'https://'",
            "'https://loom.example.com:port'",
            "'https://loom example.com'",
            "42",
        ],
    )
    def test_any_other_dashboard_url_is_dropped_with_a_warning(self, config_dir, value):
        """CONF-5: never fatal; no link, and a warning naming file and key for doctor."""
        path = loom_config(config_dir, f"dashboard_url: {value}\n")
        config = load(config_dir)
        assert config.loom.dashboard_url is None
        (warning,) = config.warnings
        assert warning.startswith(f"{path}: memory.loom.dashboard_url: ")
        assert "dropped" in warning and "\n" not in warning

    @pytest.mark.parametrize(
        "url",
        [
            "https://ada:s3cret@loom.example.com/ns/ada",
            "https://token@loom.example.com",
            "http://@loom.example.com",
        ],
    )
    def test_credentials_in_the_dashboard_url_are_refused_and_not_repeated(self, config_dir, url):
        """CONF-5, CONF-6: the link would show them on the Memory page, so the configuration
        refuses to load, as it does for the gateway URL; the error does not print the secret.
        """
        path = loom_config(config_dir, f"dashboard_url: '{url}'\n")
        text = assert_one_line(load_error(config_dir), path, "memory.loom.dashboard_url")
        assert "credentials" in text
        assert "s3cret" not in text and "token" not in text

    def test_credentials_in_a_dashboard_url_from_the_environment_are_refused(self, config_dir):
        """CONF-3, CONF-5: `${LOOM_DASHBOARD_URL:-}` is held to the same rule."""
        loom_config(config_dir, "dashboard_url: ${LOOM_DASHBOARD_URL:-}\n")
        assert load(config_dir).loom.dashboard_url is None
        with pytest.raises(ConfigError, match="credentials"):
            load(config_dir, LOOM_DASHBOARD_URL="https://ada:s3cret@loom.example.com")

    def test_defer_extraction_defaults_to_false(self, config_dir):
        """CONF-5, SWEEP-3: waiting extraction unless asked for the queued mode."""
        shared(config_dir, "memory:\n  backend: loom\n")
        assert load(config_dir).loom.defer_extraction is False

    @pytest.mark.parametrize(
        ("value", "expected"), [("true", True), ("false", False), ("'true'", True)]
    )
    def test_defer_extraction_takes_a_boolean(self, config_dir, value, expected):
        """CONF-5, SWEEP-4: true turns the queued mode on; the word from a ${…} counts."""
        loom_config(config_dir, f"defer_extraction: {value}\n")
        assert load(config_dir).loom.defer_extraction is expected

    def test_an_empty_defer_extraction_means_the_default(self, config_dir):
        """CONF-3, CONF-5: `${LOOM_DEFER:-}` left empty is false, not an error."""
        loom_config(config_dir, "defer_extraction: ${LOOM_DEFER:-}\n")
        assert load(config_dir).loom.defer_extraction is False
        assert load(config_dir, LOOM_DEFER="true").loom.defer_extraction is True

    @pytest.mark.parametrize("value", ["1", "'sometimes'", "[true]"])
    def test_a_non_boolean_defer_extraction_is_refused(self, config_dir, value):
        """CONF-5, CONF-7: anything but a boolean is an error."""
        path = loom_config(config_dir, f"defer_extraction: {value}\n")
        text = assert_one_line(load_error(config_dir), path, "memory.loom.defer_extraction")
        assert "is not a boolean; expected true or false" in text

    def test_an_unknown_key_under_memory_loom_warns(self, config_dir):
        """CONF-7: a typo under memory.loom is a warning, never a failure."""
        path = loom_config(config_dir, "namespce: ada\n")
        config = load(config_dir)
        (warning,) = config.warnings
        assert warning.startswith(f"{path}: memory.loom.namespce: unknown key")
        assert "org, namespace, dashboard_url, defer_extraction" in warning

    def test_a_value_is_blamed_on_the_layer_it_came_from(self, config_dir, workspace):
        """CONF-7: the merged value's own file is named, not the one that chose Loom."""
        tracked = settings(workspace, "memory:\n  loom:\n    org: Acme Corp\n")
        local(config_dir, "memory:\n  backend: loom\n")
        assert_one_line(load_error(config_dir, workspace), tracked, "memory.loom.org")


class TestGatewayUrl:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
            ("http://127.0.0.1:8787/", "http://127.0.0.1:8787"),
            ("https://gw.internal/mcp//", "https://gw.internal/mcp"),
            ("' https://gw.internal '", "https://gw.internal"),
        ],
    )
    def test_a_gateway_url_is_kept_without_its_trailing_slash(self, config_dir, value, expected):
        """CONF-6: http or https with a host; trailing slashes go, surrounding blanks too."""
        shared(config_dir, f"mcp_gateway_url: {value}\n")
        assert load(config_dir).mcp_gateway_url == expected

    @pytest.mark.parametrize("value", ["''", "", "null"])
    def test_an_empty_gateway_url_means_none(self, config_dir, value):
        """CONF-6: empty or null is no gateway."""
        shared(config_dir, f"mcp_gateway_url: {value}\n")
        assert load(config_dir).mcp_gateway_url is None

    @pytest.mark.parametrize(
        "value",
        [
            "gw.internal:8787",
            "/catalog",
            "ftp://gw.internal",
            "'https://'",
            "'http://gw.internal:notaport'",
            "'http://gw internal'",
            "'http://gw.internal/?token=x'",
            "'http://gw.internal/#frag'",
            "8787",
            "[http://gw]",
        ],
    )
    def test_a_url_that_is_no_gateway_base_is_refused(self, config_dir, value):
        """CONF-6, CONF-7: one line naming the key and what a gateway URL looks like."""
        path = shared(config_dir, f"mcp_gateway_url: {value}\n")
        text = assert_one_line(load_error(config_dir), path, "mcp_gateway_url")
        assert "expected" in text

    @pytest.mark.parametrize(
        "url", ["https://ada:s3cret@gw.internal", "https://token@gw.internal/mcp"]
    )
    def test_credentials_in_the_url_are_refused_and_not_repeated(self, config_dir, url):
        """CONF-6: no credentials in the URL; the error does not print the secret back."""
        path = local(config_dir, f"mcp_gateway_url: '{url}'\n")
        text = assert_one_line(load_error(config_dir), path, "mcp_gateway_url")
        assert "credentials" in text
        assert "s3cret" not in text and "token" not in text

    def test_the_gateway_url_is_checked_under_memu_too(self, config_dir):
        """CONF-6: the gateway also serves external mode, so the key is always checked."""
        path = shared(config_dir, "memory:\n  backend: memu\nmcp_gateway_url: nonsense\n")
        assert_one_line(load_error(config_dir), path, "mcp_gateway_url")


class TestErrors:
    def test_a_yaml_syntax_error_names_file_and_line(self, config_dir):
        """CONF-7: a parse error says where, in one line."""
        path = shared(config_dir, "memory:\n  backend: loom\n  loom: [unclosed\n")
        error = load_error(config_dir)
        text = assert_one_line(error, path, None)
        assert "line 4" in text and "invalid YAML" in text
        assert error.line == 4

    def test_a_top_level_list_is_refused(self, config_dir, workspace):
        """CONF-7: the exact message for a settings.yaml that is not a mapping."""
        tracked = settings(workspace, "- memory\n- backend\n")
        error = load_error(config_dir, workspace)
        assert str(error) == f"{tracked}: top level is a list; expected a mapping"
        assert (error.path, error.key) == (tracked, None)

    @pytest.mark.parametrize(("text", "kind"), [("loom\n", "a string"), ("3\n", "an integer")])
    def test_a_top_level_scalar_is_refused(self, config_dir, text, kind):
        """CONF-7: a file that holds one plain value is not a configuration."""
        path = shared(config_dir, text)
        assert str(load_error(config_dir)) == f"{path}: top level is {kind}; expected a mapping"

    def test_a_directory_where_a_file_belongs_is_one_line(self, config_dir):
        """CONF-7: a layer that cannot be read is named, with the reason."""
        (config_dir / "config.yaml").mkdir()
        text = assert_one_line(load_error(config_dir), config_dir / "config.yaml", None)
        assert "cannot be read" in text

    def test_a_file_that_is_not_utf8_is_one_line(self, config_dir):
        """CONF-7: undecodable bytes are reported, not raised as UnicodeDecodeError."""
        path = config_dir / "config.local.yaml"
        path.write_bytes(b"memory:\n  backend: \xff\xfe\n")
        text = assert_one_line(load_error(config_dir), path, None)
        assert "UTF-8" in text

    def test_a_character_yaml_refuses_is_one_line(self, config_dir):
        """CONF-7: the YAML reader's own multi-line complaint is folded into one line."""
        path = config_dir / "config.yaml"
        path.write_bytes(b"name: bell\x07\n")
        text = assert_one_line(load_error(config_dir), path, None)
        assert "#x0007" in text and "not allowed" in text

    @pytest.mark.parametrize(
        ("text", "key"),
        [
            ("memory:\n  backend: foo\n", "memory.backend"),
            ("memory: plain\n", "memory"),
            ("x: ${UNSET_VARIABLE}\n", "x"),
            ("memory:\n  backend: loom\n  loom:\n    org: Bad Name\n", "memory.loom.org"),
            ("memory:\n  backend: loom\n  loom: 7\n", "memory.loom"),
            ("mcp_gateway_url: 'http://a:b@gw'\n", "mcp_gateway_url"),
        ],
    )
    def test_every_error_is_one_line_naming_file_and_key(self, config_dir, text, key):
        """CONF-7: file, key, what is wrong and what is expected, on one line."""
        path = local(config_dir, text)
        message = assert_one_line(load_error(config_dir), path, key)
        assert "expected" in message

    def test_a_config_error_is_an_exception_with_path_and_key(self, config_dir):
        """CONF-7: callers (the CLI, doctor) read path and key off the error."""
        path = shared(config_dir, "memory:\n  backend: 3\n")
        error = load_error(config_dir)
        assert isinstance(error, Exception)
        assert (error.path, error.key) == (path, "memory.backend")
        assert "3 is not a memory backend" in error.problem


# --- memory.loom.sweep_concurrency (SWEEP-14) -------------------------------------------------

SWEEP_KEY = "memory.loom.sweep_concurrency"
BAD_CONCURRENCY = ["0", "33", "-1", "true", "2.5", "'four'", "'٤'", "[4]"]


class TestSweepConcurrency:
    """How many sessions' windows one sweep may have in flight (SWEEP-14): 1 to 32, default 4."""

    @pytest.mark.parametrize(
        ("value", "expected"),
        [(None, SWEEP_CONCURRENCY_DEFAULT), ("", 4), (1, 1), (32, 32), ("8", 8), (" 16 ", 16)],
    )
    def test_the_loader_s_check_takes_a_whole_number_from_one_to_thirty_two(
        self, config_dir, value, expected
    ):
        """CONF-3: the digits a ${VAR:-4} gives count; empty is the default."""
        checker = KeyChecker({SWEEP_KEY: config_dir / "config.yaml"}, [], [])
        assert checker.whole_number(SWEEP_KEY, value, 4, low=1, high=32) == expected

    @pytest.mark.parametrize(
        "value", [0, 33, -1, True, 2.5, "four", "٤", "1e1", [4], pytest.param(10**5000, id="huge")]
    )
    def test_the_loader_s_check_refuses_anything_else_in_one_line(self, config_dir, value):
        """CONF-7: the file and the key, what is wrong and what is expected."""
        path = config_dir / "config.yaml"
        checker = KeyChecker({SWEEP_KEY: path}, [], [])
        with pytest.raises(ConfigError) as refused:
            checker.whole_number(SWEEP_KEY, value, 4, low=1, high=SWEEP_CONCURRENCY_MAX)
        text = assert_one_line(refused.value, path, SWEEP_KEY)
        assert "is not a whole number from 1 to 32; expected" in text
        # A huge value is never quoted whole; the path's own length (the test's
        # temporary folder) is not the message's to answer for.
        assert len(text.removeprefix(str(path))) < 150
        assert not any(run.isdigit() and len(run) > 20 for run in text.split())

    def test_nerve_s_own_settings_give_the_runtime_the_same_rule(self):
        """NERVE-5: the engine's strict reader takes the key from Nerve's merged mapping."""
        settings = {"memory": {"backend": "loom", "loom": {"sweep_concurrency": "8"}}}
        assert loom_values(settings).sweep_concurrency == 8
        assert loom_values({"memory": {"backend": "loom"}}).sweep_concurrency == 4
        settings["memory"]["loom"]["sweep_concurrency"] = 0
        with pytest.raises(ValueError, match=f"^{SWEEP_KEY}: 0 is not a whole number"):
            loom_values(settings)

    def test_under_memu_it_is_not_checked(self, config_dir):
        """CONF-5: memory.loom is carried through unchecked while the backend is memU."""
        shared(config_dir, "memory:\n  loom:\n    sweep_concurrency: lots\n")
        assert load(config_dir).memory_backend == "memu"

    def test_the_registry_declares_it_on_loom_s_section(self):
        """CONF-5: a key of memory.loom, checked while the backend is Loom."""
        assert "sweep_concurrency" in LOOM_KEYS

    def test_it_defaults_to_four(self, config_dir):
        shared(config_dir, "memory:\n  backend: loom\n")
        assert load(config_dir).loom.sweep_concurrency == SWEEP_CONCURRENCY_DEFAULT

    def test_a_value_or_a_variable_is_taken_without_a_warning(self, config_dir):
        loom_config(config_dir, "sweep_concurrency: ${SWEEP_CONCURRENCY:-8}\n")
        assert load(config_dir).loom.sweep_concurrency == 8
        config = load(config_dir, SWEEP_CONCURRENCY="2")
        assert (config.loom.sweep_concurrency, config.warnings) == (2, ())

    @pytest.mark.parametrize("value", BAD_CONCURRENCY)
    def test_a_bad_value_refuses_to_load_in_one_line(self, config_dir, value):
        path = loom_config(config_dir, f"sweep_concurrency: {value}\n")
        text = assert_one_line(load_error(config_dir), path, SWEEP_KEY)
        assert "is not a whole number from 1 to 32" in text

    def test_the_docs_list_it_among_the_known_keys(self):
        assert SWEEP_KEY in known_keys()

    def test_the_loaded_value_reaches_the_backend_and_its_sweeper(self, config_dir):
        """SWEEP-14: ``nerve memory sweep`` builds its Sweeper from ``memory.sweep_concurrency``."""
        loom_config(config_dir, "sweep_concurrency: 2\n")
        assert LoomMemory.from_config(load(config_dir)).sweep_concurrency == 2

    def test_a_bad_value_is_one_line_and_exit_2_at_the_command_line(self, run_nerve, tmp_path):
        from tests.support.processes import assert_one_line_error

        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.local.yaml").write_text(
            "memory:\n  backend: loom\n  loom:\n    sweep_concurrency: 0\n"
        )
        result = run_nerve("init", "--workspace", "ws", "--config-dir", "cfg")
        assert_one_line_error(result, "config.local.yaml", SWEEP_KEY, "1 to 32")
        assert not (tmp_path / "ws").exists()

    def test_the_backend_built_from_nerve_s_settings_holds_the_same_rule(self):
        """NERVE-5: the engine's ``LoomMemory`` carries the value to its ``Sweeper``; a value
        given in code is held to the rule too, blamed on the parameter."""
        settings = {"memory": {"backend": "loom", "loom": {"sweep_concurrency": " 8 "}}}
        assert LoomMemory.from_settings(settings).sweep_concurrency == 8
        assert LoomMemory().sweep_concurrency == SWEEP_CONCURRENCY_DEFAULT
        with pytest.raises(ValueError, match=r"^sweep_concurrency: 0 is not a whole number"):
            LoomMemory(sweep_concurrency=0)
