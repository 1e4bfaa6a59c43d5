"""Loading Nerve's configuration: three YAML layers, variable expansion, lockdown (CONF-1…CONF-7).

The layers, lowest first, are the workspace's tracked ``config/settings.yaml``, then
``config.yaml`` and the machine-local ``config.local.yaml`` in the configuration directory.
Each file is read and expanded on its own, then laid over the layers below it. Only after the
merge are the keys this package owns checked: ``memory.backend``, the configured backend's own
section (``memory.<name>``, whose keys and checks are on its registry entry) and
``mcp_gateway_url``. Every other key is carried through untouched in ``Config.data``.

Anything wrong raises ``ConfigError`` (``provisioner.config.model``), whose text is a single
line naming the file, the dotted key, what is wrong and what would be accepted, so the CLI can
print it and exit with status 2 instead of showing a traceback. The expansion and merging are
in ``provisioner.config.expansion``, the key checks in ``provisioner.config.checks``. Every
file is read at a bounded cost (CONF-8, see ``provisioner.config.bounded_yaml``): a FIFO, an
oversized file, an alias bomb, an alias to itself, deep nesting and a key written twice are
refused with one line naming the file. A file the machine cannot give (permission denied, an
I/O error) is a ``FileFault`` naming it instead, with that fault's status (73, 74; REL-4).

Problems that do not stop Nerve (an unknown key, a dashboard link that cannot be used) end up
in ``Config.warnings`` for ``nerve doctor`` to show; an unknown key, at the top level too,
warns, naming the known key it probably meant when one is close (FLEET-4).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from provisioner.backends import BACKENDS, LoomSettings
from provisioner.config.bounded_yaml import YamlLimitError, load_bounded, read_small_text
from provisioner.config.checks import (
    DASHBOARD_URL_KEY,
    GATEWAY_URL_KEY,
    LOCKDOWN_KEY,
    KeyChecker,
    boolean_value,
    memory_keys,
)
from provisioner.config.expansion import MissingVariables, expand_tree, overlay, record_leaves
from provisioner.config.model import Config, ConfigError, ConfigFile, kind_of, located
from provisioner.runtime.face import file_fault

# CONF-1: the layers, lowest first.
SETTINGS_FILE = Path("config") / "settings.yaml"  # CONF-1: tracked, under the workspace
CONFIG_FILE = "config.yaml"  # CONF-1: in the configuration directory
LOCAL_FILE = "config.local.yaml"  # CONF-1, CONF-3: machine-local, outranks the others
LAYER_SETTINGS = "settings"
LAYER_CONFIG = "config"
LAYER_LOCAL = "local"

# Why a file was not read (ConfigFile.skipped).
SKIPPED_ABSENT = "absent"
SKIPPED_LOCKDOWN = "lockdown"  # CONF-3

LOCKDOWN_ENV = "NERVE_LOCKDOWN"  # CONF-3: can turn lockdown on, never off
LOCKDOWN_ENV_ON = frozenset({"1", "true", "yes", "on"})  # CONF-3
LOCKDOWN_ENV_OFF = frozenset({"", "0", "false", "no", "off"})  # CONF-3: leaves settings' choice


def load_config(
    config_dir: str | os.PathLike[str],
    workspace: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    settings_text: str | None = None,
) -> Config:
    """Read, expand, merge and check the configuration layers (CONF-1…CONF-7).

    Missing files are skipped and an empty file counts as an empty mapping. Under lockdown the
    machine-local file is not opened at all. ``settings_text`` is read in place of the
    workspace's tracked settings file: ``nerve init`` passes the text it is about to place
    there, so it reads the layers the instance will read once init is done, locked or not
    (CONF-3). Raises ``ConfigError`` (one line) for any input that cannot be used, including
    every unset required variable at once.
    """
    env = os.environ if env is None else env
    state = _Loading(env)
    state.lockdown = _lockdown_from_env(env, state.warnings)
    for layer, path in _layer_paths(Path(config_dir), workspace):
        if layer == LAYER_LOCAL and state.lockdown:
            state.files.append(ConfigFile(path, layer, read=False, skipped=SKIPPED_LOCKDOWN))
            continue
        state.read_layer(layer, path, settings_text if layer == LAYER_SETTINGS else None)
    state.missing.raise_if_any()
    return _checked(state)


def configured_backend(
    config_dir: str | os.PathLike[str],
    workspace: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """The backend the configuration names (after expansion), or None if no file names one.

    ``nerve init`` uses this to follow an existing configuration (INIT-2). A configuration
    that does not load raises ``ConfigError`` here too.
    """
    config = load_config(config_dir, workspace, env)
    memory = config.data.get("memory") or {}
    return config.memory_backend if memory.get("backend") not in (None, "") else None


# --- reading the layers ------------------------------------------------------------------------


class _Loading:
    """What ``load_config`` gathers while it walks the layers."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.lockdown = False
        self.files: list[ConfigFile] = []
        self.merged: dict[Any, Any] = {}
        self.sources: dict[str, Path] = {}
        self.warnings: list[str] = []
        self.missing = MissingVariables()
        self.defaulted: set[str] = set()

    def read_layer(self, layer: str, path: Path, text: str | None = None) -> None:
        """Read one file (or ``text`` in its place), expand it, and lay it over the layers
        read so far."""
        raw = _read_yaml(path, text)
        if raw is None:
            self.files.append(ConfigFile(path, layer, read=False, skipped=SKIPPED_ABSENT))
            return
        self.missing.defaulted = set()
        data = expand_tree(raw, path, "", self.env, self.missing)
        leaves: dict[str, Path] = {}
        for key, value in data.items():
            record_leaves(leaves, value, path, str(key))
        self.defaulted.difference_update(leaves)
        self.defaulted.update(self.missing.defaulted)
        if layer == LAYER_SETTINGS:
            self.lockdown = _lockdown_from_settings(data, path) or self.lockdown
        elif LOCKDOWN_KEY in data:
            self.warnings.append(
                located(
                    path,
                    LOCKDOWN_KEY,
                    f"ignored here; lockdown is set in {SETTINGS_FILE.name} "
                    f"or with {LOCKDOWN_ENV}=1",
                )
            )
        overlay(self.merged, self.sources, data, path, "")
        self.files.append(ConfigFile(path, layer, read=True))


def _layer_paths(
    config_dir: Path, workspace: str | os.PathLike[str] | None
) -> Iterator[tuple[str, Path]]:
    """The layers in the order they are laid over each other, lowest first (CONF-1)."""
    if workspace is not None:
        yield LAYER_SETTINGS, Path(workspace) / SETTINGS_FILE
    yield LAYER_CONFIG, config_dir / CONFIG_FILE
    yield LAYER_LOCAL, config_dir / LOCAL_FILE


def _read_yaml(path: Path, text: str | None = None) -> dict[Any, Any] | None:
    """The file's top-level mapping, ``{}`` for an empty file, None when it does not exist.

    ``text`` given is parsed as the file's content, and the file is not opened.
    """
    try:
        text = read_small_text(path) if text is None else text
    except YamlLimitError as exc:
        raise ConfigError(path, None, exc.problem) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            path, None, f"is not UTF-8 text ({exc.reason}); expected a YAML file"
        ) from exc
    except OSError as exc:
        fault = file_fault(exc, path)
        if fault is not None:  # REL-4: permission or I/O, with the status every command gives it
            raise fault from exc
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            path, None, f"cannot be read ({reason}); expected a readable YAML file"
        ) from exc
    if text is None:
        return None
    try:
        data = load_bounded(text)
    except YamlLimitError as exc:
        where = f"line {exc.line}: " if exc.line is not None else ""
        raise ConfigError(path, None, f"{where}{exc.problem}", line=exc.line) from None
    except yaml.MarkedYAMLError as exc:
        raise _syntax_error(path, exc) from None
    except yaml.reader.ReaderError as exc:
        problem = f"character #x{exc.character:04x} at position {exc.position} is not allowed"
        raise ConfigError(path, None, f"{problem} in YAML; expected a YAML file") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(path, None, f"is not valid YAML ({exc}); expected a YAML file") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(path, None, f"top level is {kind_of(data)}; expected a mapping")
    return data


def _syntax_error(path: Path, exc: yaml.MarkedYAMLError) -> ConfigError:
    """A YAML syntax error as one line naming the file and the line it was found on."""
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    where = f"line {line}, column {mark.column + 1}: " if mark is not None else ""
    problem = exc.problem or exc.context or "syntax error"
    return ConfigError(
        path, None, f"{where}invalid YAML ({problem}); expected valid YAML syntax", line=line
    )


# --- CONF-3: lockdown ----------------------------------------------------------------------


def _lockdown_from_env(env: Mapping[str, str], warnings: list[str]) -> bool:
    """True when ``NERVE_LOCKDOWN`` turns lockdown on; it never turns it off (CONF-3)."""
    raw = env.get(LOCKDOWN_ENV)
    if raw is None:
        return False
    word = raw.strip().lower()
    if word in LOCKDOWN_ENV_ON:
        return True
    if word not in LOCKDOWN_ENV_OFF:
        warnings.append(
            f"{LOCKDOWN_ENV}: {raw!r} is not understood and leaves lockdown as "
            f"{SETTINGS_FILE.name} sets it; expected {LOCKDOWN_ENV}=1 to turn it on"
        )
    return False


def _lockdown_from_settings(data: Mapping[Any, Any], path: Path) -> bool:
    return boolean_value(data.get(LOCKDOWN_KEY), False, path, LOCKDOWN_KEY)


def _checked(state: _Loading) -> Config:
    """Check the merged keys this package owns and build the Config."""
    check = KeyChecker(state.sources, state.warnings, state.files)
    check.top_level(state.merged)
    memory = check.mapping("memory", state.merged.get("memory"), memory_keys())
    backend = check.backend(memory.get("backend"))
    section = BACKENDS[backend].settings
    settings = None
    if section is not None:
        key = f"memory.{backend}"
        settings = section.check(check, check.mapping(key, memory.get(backend), section.keys))
    loom = settings if isinstance(settings, LoomSettings) else LoomSettings()
    # CONF-5: a dashboard link is shown to whoever opens the Memory page, so a user or password
    # in it is refused like one in the gateway URL, not dropped with a warning.
    check.refuse_credentials(
        DASHBOARD_URL_KEY, loom.dashboard_url, why="the Memory page shows the link to anyone"
    )
    gateway = check.gateway_url(state.merged.get(GATEWAY_URL_KEY))
    return Config(
        memory_backend=backend,
        mcp_gateway_url=gateway,
        loom=loom,
        lockdown=state.lockdown,
        files=tuple(state.files),
        sources=dict(state.sources),
        defaulted=frozenset(state.defaulted),
        warnings=tuple(state.warnings),
        data=state.merged,
        backend_settings=settings,
    )
