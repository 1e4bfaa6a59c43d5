"""Loading Nerve's configuration: three YAML layers, variable expansion, lockdown (CONF-1…CONF-7).

The layers, lowest first, are the workspace's tracked ``config/settings.yaml``, then
``config.yaml`` and the machine-local ``config.local.yaml`` in the configuration directory.
Each file is read and expanded on its own, then laid over the layers below it. Only after the
merge are the keys this package owns checked: ``memory.backend``, the configured backend's own
section (``memory.<name>``, whose keys and checks are on its registry entry) and
``mcp_gateway_url``. Every other key is carried through untouched in ``Config.data``.

Anything wrong raises ``ConfigError``, whose text is a single line naming the file, the dotted
key, what is wrong and what would be accepted, so the CLI can print it and exit with status 2
instead of showing a traceback. Every file is read at a bounded cost (CONF-8, see
``provisioner.bounded_yaml``): a FIFO, an oversized file, an alias bomb, an alias to itself,
deep nesting and a key written twice are refused with one line naming the file.

Problems that do not stop Nerve (an unknown key, a dashboard link that cannot be used) end up
in ``Config.warnings`` for ``nerve doctor`` to show.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provisioner.backends import (
    BACKEND_NAMES,
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_DEFER_EXTRACTION,
    LOOM_KEYS,
    LOOM_NAME_MAX,
    LOOM_NAME_PATTERN,
    LOOM_NAME_RULE,
    LoomSettings,
    UnknownBackend,
    get_backend,
)
from provisioner.bounded_yaml import YamlLimitError, load_bounded, read_small_text
from provisioner.errors import UserError
from provisioner.urls import absolute_http_url, redacted

__all__ = [
    "DEFAULT_DEFER_EXTRACTION",
    "LOOM_KEYS",
    "LOOM_NAME_MAX",
    "LOOM_NAME_PATTERN",
    "LOOM_NAME_RULE",
    "Config",
    "ConfigError",
    "ConfigFile",
    "LoomSettings",
    "configured_backend",
    "known_keys",
    "load_config",
    "memory_keys",
]

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

LOCKDOWN_KEY = "lockdown"  # CONF-3: read from settings.yaml only
LOCKDOWN_ENV = "NERVE_LOCKDOWN"  # CONF-3: can turn lockdown on, never off
LOCKDOWN_ENV_ON = frozenset({"1", "true", "yes", "on"})  # CONF-3
LOCKDOWN_ENV_OFF = frozenset({"", "0", "false", "no", "off"})  # CONF-3: leaves settings' choice
GATEWAY_URL_KEY = "mcp_gateway_url"  # CONF-6
TOP_LEVEL_KEYS = (LOCKDOWN_KEY, GATEWAY_URL_KEY, "memory")  # the top-level keys checked here

# CONF-2: `$$`, `${NAME}`, `${NAME:-default}`; a `${` that fits neither is malformed.
VARIABLE_REFERENCE = re.compile(
    r"\$(?:(?P<dollar>\$)"
    r"|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<malformed>\{))"
)

BOOLEAN_WORDS = {"true": True, "false": False}  # CONF-3, CONF-5: what `${VAR:-false}` can give


class ConfigError(UserError):
    """A configuration that cannot be used; ``str()`` is one line for the user.

    ``path`` is the file at fault (as given, joined with the file name) and ``key`` the dotted
    key inside it, either of which may be None when the problem is not about one key. ``line``
    is set for YAML syntax errors.
    """

    def __init__(
        self, path: Path | None, key: str | None, problem: str, *, line: int | None = None
    ) -> None:
        self.path = path
        self.key = key
        self.problem = _one_line(problem)
        self.line = line
        self.missing: tuple[str, ...] = ()  # CONF-2: the unset required variables, if any
        super().__init__(_located(path, key, self.problem))


@dataclass(frozen=True)
class ConfigFile:
    """One layer that was considered: where it is, whether it was read, and if not, why."""

    path: Path
    layer: str
    read: bool
    skipped: str | None = None


@dataclass(frozen=True)
class Config:
    """The checked configuration, and what ``nerve doctor`` needs to explain it.

    ``data`` is the whole merged, expanded mapping (treat it as read-only); ``sources`` maps
    every dotted leaf key of it to the file whose value won. ``backend_settings`` is what the
    configured backend's settings check returned (None for a backend without settings);
    ``loom`` is Loom's, with defaults under any other backend.
    """

    memory_backend: str
    mcp_gateway_url: str | None
    loom: LoomSettings
    lockdown: bool
    files: tuple[ConfigFile, ...]
    sources: Mapping[str, Path]
    warnings: tuple[str, ...]
    data: Mapping[str, Any] = field(repr=False)
    backend_settings: Any = None
    # Dotted keys whose winning value used a ${NAME:-default} fallback: nobody chose them.
    defaulted: frozenset[str] = frozenset()

    def source_of(self, key: str) -> Path | None:
        """The file that set ``key``, or the highest file that set something under it."""
        return _source_of(self.sources, key)


def load_config(
    config_dir: str | os.PathLike[str],
    workspace: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Read, expand, merge and check the configuration layers (CONF-1…CONF-7).

    Missing files are skipped and an empty file counts as an empty mapping. Under lockdown the
    machine-local file is not opened at all. Raises ``ConfigError`` (one line) for any input
    that cannot be used, including every unset required variable at once.
    """
    env = os.environ if env is None else env
    state = _Loading(env)
    state.lockdown = _lockdown_from_env(env, state.warnings)
    for layer, path in _layer_paths(Path(config_dir), workspace):
        if layer == LAYER_LOCAL and state.lockdown:
            state.files.append(ConfigFile(path, layer, read=False, skipped=SKIPPED_LOCKDOWN))
            continue
        state.read_layer(layer, path)
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
        self.missing = _MissingVariables()
        self.defaulted: set[str] = set()

    def read_layer(self, layer: str, path: Path) -> None:
        """Read one file, expand it, and lay it over the layers read so far."""
        raw = _read_yaml(path)
        if raw is None:
            self.files.append(ConfigFile(path, layer, read=False, skipped=SKIPPED_ABSENT))
            return
        self.missing.defaulted = set()
        data = _expand_tree(raw, path, "", self.env, self.missing)
        leaves: dict[str, Path] = {}
        for key, value in data.items():
            _record_leaves(leaves, value, path, str(key))
        self.defaulted.difference_update(leaves)
        self.defaulted.update(self.missing.defaulted)
        if layer == LAYER_SETTINGS:
            self.lockdown = _lockdown_from_settings(data, path) or self.lockdown
        elif LOCKDOWN_KEY in data:
            self.warnings.append(
                _located(
                    path,
                    LOCKDOWN_KEY,
                    f"ignored here; lockdown is set in {SETTINGS_FILE.name} "
                    f"or with {LOCKDOWN_ENV}=1",
                )
            )
        _overlay(self.merged, self.sources, data, path, "")
        self.files.append(ConfigFile(path, layer, read=True))


def _layer_paths(
    config_dir: Path, workspace: str | os.PathLike[str] | None
) -> Iterator[tuple[str, Path]]:
    """The layers in the order they are laid over each other, lowest first (CONF-1)."""
    if workspace is not None:
        yield LAYER_SETTINGS, Path(workspace) / SETTINGS_FILE
    yield LAYER_CONFIG, config_dir / CONFIG_FILE
    yield LAYER_LOCAL, config_dir / LOCAL_FILE


def _read_yaml(path: Path) -> dict[Any, Any] | None:
    """The file's top-level mapping, ``{}`` for an empty file, None when it does not exist."""
    try:
        text = read_small_text(path)
    except YamlLimitError as exc:
        raise ConfigError(path, None, exc.problem) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            path, None, f"is not UTF-8 text ({exc.reason}); expected a YAML file"
        ) from exc
    except OSError as exc:
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
        raise ConfigError(path, None, f"top level is {_kind(data)}; expected a mapping")
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


# --- CONF-2: expansion ---------------------------------------------------------------------


class _MissingVariables:
    """Unset required variables, gathered over every file so one error can name them all."""

    def __init__(self) -> None:
        self._found: dict[tuple[Path, str], list[str]] = {}
        # Keys of the file being read where a ${NAME:-default} fell back to its default.
        self.defaulted: set[str] = set()

    def add(self, path: Path, key: str, name: str) -> None:
        names = self._found.setdefault((path, key), [])
        if name not in names:
            names.append(name)

    def raise_if_any(self) -> None:
        """Raise one ConfigError naming every missing variable with its file and key."""
        if not self._found:
            return
        places = []
        for (path, key), names in self._found.items():
            refs = ", ".join("${" + name + "}" for name in names)
            verb = "is" if len(names) == 1 else "are"
            places.append((path, key, f"{refs} {verb} not set"))
        (first_path, first_key, first_problem), *others = places
        problem = "; ".join([first_problem, *(_located(p, k, m) for p, k, m in others)])
        error = ConfigError(
            first_path,
            first_key,
            f"{problem}; expected each variable set in the environment, "
            "or a default written as ${NAME:-default}",
        )
        every = (name for names in self._found.values() for name in names)
        error.missing = tuple(dict.fromkeys(every))
        raise error


def _expand_tree(
    value: Any, path: Path, key: str, env: Mapping[str, str], missing: _MissingVariables
) -> Any:
    """A copy of ``value`` with every string expanded; keys are never expanded."""
    if isinstance(value, str):
        return _expand_string(value, path, key, env, missing)
    if isinstance(value, dict):
        return {
            item_key: _expand_tree(item, path, _join(key, item_key), env, missing)
            for item_key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _expand_tree(item, path, f"{key}[{index}]", env, missing)
            for index, item in enumerate(value)
        ]
    return value


def _expand_string(
    text: str, path: Path, key: str, env: Mapping[str, str], missing: _MissingVariables
) -> str:
    """Expand ``${NAME}``, ``${NAME:-default}`` and ``$$``; a lone ``$`` stays (CONF-2).

    An unset required variable is recorded in ``missing`` (and expands to nothing for now);
    a ``${`` that is not a reference raises at once.
    """

    def replace(match: re.Match[str]) -> str:
        if match["dollar"]:
            return "$"
        if match["malformed"]:
            raise ConfigError(
                path,
                key,
                f"{text!r} has a '${{' that is not a variable reference; expected ${{NAME}}, "
                "${NAME:-default}, or $$ for a literal $",
            )
        name, default = match["name"], match["default"]
        value = env.get(name)
        if default is not None:
            if not value:
                missing.defaulted.add(key)
            return value if value else default
        if value is None:
            missing.add(path, key, name)
            return ""
        return value

    return VARIABLE_REFERENCE.sub(replace, text)


# --- CONF-1: merging -----------------------------------------------------------------------


def _overlay(
    base: dict[Any, Any], sources: dict[str, Path], over: Mapping[Any, Any], path: Path, prefix: str
) -> None:
    """Lay ``over`` onto ``base`` in place: mappings merge, anything else replaces."""
    for key, value in over.items():
        dotted = _join(prefix, key)
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _overlay(base[key], sources, value, path, dotted)
            continue
        for old in [k for k in sources if k == dotted or k.startswith(dotted + ".")]:
            del sources[old]
        base[key] = value
        _record_leaves(sources, value, path, dotted)


def _record_leaves(sources: dict[str, Path], value: Any, path: Path, dotted: str) -> None:
    """Note ``path`` as the source of every leaf under ``dotted`` (an empty mapping is a leaf)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _record_leaves(sources, item, path, _join(dotted, key))
    else:
        sources[dotted] = path


def _source_of(sources: Mapping[str, Path], key: str) -> Path | None:
    if key in sources:
        return sources[key]
    below = [path for leaf, path in sources.items() if leaf.startswith(key + ".")]
    return below[-1] if below else None


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
    return _boolean(data.get(LOCKDOWN_KEY), False, path, LOCKDOWN_KEY)


# --- CONF-4…CONF-7: checking ---------------------------------------------------------------


def _checked(state: _Loading) -> Config:
    """Check the merged keys this package owns and build the Config."""
    check = _Checker(state)
    memory = check.mapping("memory", state.merged.get("memory"), memory_keys())
    backend = check.backend(memory.get("backend"))
    section = BACKENDS[backend].settings
    settings = None
    if section is not None:
        key = f"memory.{backend}"
        settings = section.check(check, check.mapping(key, memory.get(backend), section.keys))
    loom = settings if isinstance(settings, LoomSettings) else LoomSettings()
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


def memory_keys() -> tuple[str, ...]:
    """The keys known under ``memory``: ``backend`` and one section per backend (CONF-7)."""
    return ("backend", *sorted(BACKEND_NAMES))


def known_keys() -> tuple[str, ...]:
    """Every dotted key this loader knows, sections included, for docs held to the schema.

    A backend's section is listed with the keys its registry entry declares; a section
    without declared keys (memU's) is carried through unchecked, so only its name is known.
    """
    keys = [*TOP_LEVEL_KEYS, *(f"memory.{key}" for key in memory_keys())]
    for name in sorted(BACKEND_NAMES):
        section = BACKENDS[name].settings
        if section is not None:
            keys.extend(f"memory.{name}.{key}" for key in section.keys)
    return tuple(keys)


class _Checker:
    """Checks of merged values, each blamed on the file the value came from."""

    def __init__(self, state: _Loading) -> None:
        self.sources = state.sources
        self.warnings = state.warnings
        read = [f.path for f in state.files if f.read]
        self.fallback = read[-1] if read else None

    def where(self, key: str) -> Path | None:
        return _source_of(self.sources, key) or self.fallback

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.where(key), key, problem)

    def warn(self, key: str, problem: str) -> None:
        self.warnings.append(_located(self.where(key), key, problem))

    def mapping(self, key: str, value: Any, known: tuple[str, ...]) -> Mapping[Any, Any]:
        """``value`` as a mapping (absent or null is empty); unknown keys warn (CONF-7)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            expected = ", ".join(known)
            raise self.fail(key, f"is {_kind(value)}; expected a mapping with keys: {expected}")
        for item_key in value:
            if item_key not in known:
                self.warn(
                    _join(key, item_key),
                    f"unknown key, ignored; known keys under {key}: {', '.join(known)}",
                )
        return value

    def backend(self, value: Any) -> str:
        """``memory.backend``: one of the registry's names; absent or empty means memU (CONF-4)."""
        if value is None or value == "":
            return DEFAULT_BACKEND
        try:
            return get_backend(value).name
        except UnknownBackend as exc:
            raise self.fail("memory.backend", str(exc)) from None

    def boolean(self, key: str, value: Any, default: bool) -> bool:
        """A YAML boolean, or the words true/false (``SectionReader``)."""
        return _boolean(value, default, self.where(key), key)

    def http_url(self, value: Any) -> str | None:
        """``value`` when it is an absolute http(s) URL with a host (``SectionReader``)."""
        if isinstance(value, str) and absolute_http_url(value) is not None:
            return value
        return None

    def gateway_url(self, value: Any) -> str | None:
        """``mcp_gateway_url``: an http(s) base URL without credentials; empty is none (CONF-6)."""
        key = GATEWAY_URL_KEY
        text = value.strip() if isinstance(value, str) else value
        if text is None or text == "":
            return None
        expected = "expected an absolute http or https URL such as http://127.0.0.1:8787"
        if not isinstance(text, str):
            raise self.fail(key, f"{text!r} is {_kind(text)}; {expected}")
        parts = absolute_http_url(text)
        if parts is None:
            raise self.fail(key, f"{redacted(text)} is not a usable URL; {expected}")
        if parts.username is not None or parts.password is not None:
            raise self.fail(
                key,
                f"{redacted(text)} has credentials in it; expected a URL without user or "
                "password (the gateway knows the agent from its connection)",
            )
        if parts.query or parts.fragment:
            raise self.fail(
                key, f"{redacted(text)} has a query or fragment; expected a plain base URL"
            )
        return text.rstrip("/")


# --- small helpers -------------------------------------------------------------------------


def _boolean(value: Any, default: bool, path: Path | None, key: str) -> bool:
    """A YAML boolean, or the words true/false a ``${VAR:-false}`` reference gives."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[value.strip().lower()]
    raise ConfigError(path, key, f"{value!r} is not a boolean; expected true or false")


def _kind(value: Any) -> str:
    """How a YAML value reads in an error: 'a list', 'a string', …"""
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    kinds.update({list: "a list", dict: "a mapping"})
    return kinds.get(type(value), f"a {type(value).__name__}")


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _located(path: Path | None, key: str | None, problem: str) -> str:
    return ": ".join(str(part) for part in (path, key, problem) if part is not None)


def _one_line(text: str) -> str:
    return " ".join(text.splitlines())
