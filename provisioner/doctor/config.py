"""Doctor's configuration checks: which files were read, and where each memory value came from.

``load_config`` records the file whose value won for every key (``Config.sources``), but not
the ``${VAR}`` that file wrote. To say "from ``${NERVE_MEMORY_BACKEND}`` in settings.yaml", this
module reads the winning file again, at the same bounded cost (CONF-8), finds the raw string
at that key, and names each reference in it: a set variable by name, an unset one as the
default it fell back to. If the file changed or broke in between, the raw value is simply not
found and the file alone is named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from provisioner.backends import LOOM_KEYS
from provisioner.config.bounded_yaml import load_bounded, read_small_text
from provisioner.config.expansion import VARIABLE_REFERENCE
from provisioner.config.loader import LAYER_LOCAL, SKIPPED_ABSENT, SKIPPED_LOCKDOWN, load_config
from provisioner.config.model import Config, ConfigError
from provisioner.doctor.check import ERR, OK, WARN, Check, joined, lookup
from provisioner.runtime.face import FileFault

# DOC-1: the values whose origin doctor names; the memory.loom keys only under Loom.
ORIGIN_KEYS = ("memory.backend", "mcp_gateway_url")
LOOM_ORIGIN_KEYS = tuple(f"memory.loom.{key}" for key in LOOM_KEYS)
DEFAULT_ORIGIN = "default"
DASHBOARD_KEY = "memory.loom.dashboard_url"
DEFER_KEY = "memory.loom.defer_extraction"
# SWEEP-4, SWEEP-15, docs/config.md "Waiting and queued extraction": the risk of queued mode.
# Doctor reads no catalog offline, so the reason names the condition; the network check
# (loom.catalog) says whether the catalog lists loom_op.
QUEUED_MODE_RISK = (
    "unless the gateway's catalog lists loom_op (see loom.catalog), a queued window's "
    "watermark moves when Loom accepts the batch, not when it is written, so a failed "
    "background extraction loses it"
)


def config_checks(
    config_dir: Path, workspace: Path, env: Mapping[str, str]
) -> tuple[Config | None, list[Check]]:
    """The loaded configuration (None when it does not load) and its checks."""
    try:
        config = load_config(config_dir, workspace, env)
    except ConfigError as error:
        return None, [
            Check(
                "config.load",
                ERR,
                f"the configuration does not load: {error}",
                advice="fix the file and key named; nothing else about memory can be checked",
                source=str(error.path) if error.path else None,
            )
        ]
    except FileFault as fault:  # REL-4: the machine would not give the file; a check says so
        return None, [
            Check(
                "config.load",
                ERR,
                f"the configuration cannot be read: {fault}",
                advice="nothing else about memory can be checked until it can be read",
                source=fault.path,
            )
        ]
    checks = [files_check(config)]
    keys = ORIGIN_KEYS + (LOOM_ORIGIN_KEYS if config.memory_backend == "loom" else ())
    origins = _Origins(config, env)
    checks += [value_check(config, key, origins) for key in keys]
    warnings = _warnings(config)
    checks += [
        Check(
            f"config.warning.{name}",
            WARN,
            warning,
            advice="change or remove the key named; Nerve ignores it until then",
        )
        for name, warning in zip(warning_names(config, warnings), warnings, strict=True)
    ]
    return config, checks


def warning_names(config: Config, warnings: list[str]) -> list[str]:
    """Each warning's id name: the key it is about (``memory.colour``, ``NERVE_LOCKDOWN``), with
    ``@file`` when two layers warn about one key (FLEET-4: ids are names, not positions)."""
    names: list[str] = []
    for warning in warnings:
        layer = next((f.path for f in config.files if warning.startswith(f"{f.path}: ")), None)
        rest = warning[len(f"{layer}: ") :] if layer is not None else warning
        name = _ID_UNSAFE.sub("_", rest.split(": ", 1)[0])[:ID_NAME_MAX_CHARS]
        if name in names and layer is not None:
            name = f"{name}@{layer.name}"
        while name in names:
            name += "_"
        names.append(name)
    return names


ID_NAME_MAX_CHARS = 80  # our choice: a key's dotted name, well past any this package knows
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]")


def _warnings(config: Config) -> list[str]:
    """The loader's warnings, less a dropped dashboard link under Loom: ``loom.dashboard``
    reports that one with its fix."""
    if config.memory_backend != "loom":
        return list(config.warnings)
    return [warning for warning in config.warnings if f": {DASHBOARD_KEY}: " not in warning]


def files_check(config: Config) -> Check:
    """Which layers were read, which lockdown skipped, which are absent (CONF-1, CONF-3)."""
    read = [str(f.path) for f in config.files if f.read]
    locked = [str(f.path) for f in config.files if f.skipped == SKIPPED_LOCKDOWN]
    absent = [str(f.path) for f in config.files if f.skipped == SKIPPED_ABSENT]
    parts = [f"read {joined(read)}"]
    if config.lockdown:
        parts.append(f"lockdown on, not read: {joined(locked)}")
    if absent:
        parts.append(f"absent: {joined(absent)}")
    message = "; ".join(parts)
    if read:
        return Check("config.files", OK, message)
    local = next(f.path for f in config.files if f.layer == LAYER_LOCAL)
    return Check(
        "config.files",
        WARN,
        message + "; the defaults apply (memU, no gateway)",
        advice=f"check --config-dir and --workspace, or write {local.parent / 'config.yaml'}",
    )


def value_check(config: Config, key: str, origins: _Origins) -> Check:
    """``key = value (from …)``: the value in effect and the layer or ``${VAR}`` it came from."""
    source = origins.of(key)
    shown = _shown_value(config, key)
    origin = "the default" if source == DEFAULT_ORIGIN else f"from {source}"
    message = f"{key} = {shown}, {origin}"
    if key == DEFER_KEY and config.loom.defer_extraction:
        return defer_extraction_warning(message, config, source)
    return Check(f"config.{key}", OK, message, source=source)


def defer_extraction_warning(message: str, config: Config, source: str) -> Check:
    """WARN on ``defer_extraction: true`` with the reason (DOC-1, SWEEP-4, SWEEP-15).

    Without ``loom_op`` in the catalog the sweep cannot learn that a queued batch failed
    inside Loom, so a person who turned queued mode on should hear why before messages go
    missing; whether the catalog lists it is for the network check to say. The advice names
    the file whose value won, so the fix lands in the right layer.
    """
    where = config.sources.get(DEFER_KEY)
    place = f" in {where}" if where is not None else ""
    return Check(
        f"config.{DEFER_KEY}",
        WARN,
        f"{message}: {QUEUED_MODE_RISK}",
        advice=(
            f"set {DEFER_KEY}: false{place}, or remove it: waiting extraction, the default, "
            "moves the watermark only past what Loom took; or have the platform grant loom_op"
        ),
        source=source,
    )


def _shown_value(config: Config, key: str) -> str:
    loom = config.loom
    values: dict[str, Any] = {
        "memory.backend": config.memory_backend,
        "mcp_gateway_url": config.mcp_gateway_url,
        "memory.loom.org": loom.org,
        "memory.loom.namespace": loom.namespace,
        "memory.loom.dashboard_url": loom.dashboard_url,
        "memory.loom.defer_extraction": loom.defer_extraction,
        "memory.loom.sweep_concurrency": loom.sweep_concurrency,
    }
    value = values[key]
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Origins:
    """Where each key's value came from, reading each winning file's raw YAML once."""

    def __init__(self, config: Config, env: Mapping[str, str]) -> None:
        self._config = config
        self._env = env
        self._raw: dict[Path, Any] = {}

    def of(self, key: str) -> str:
        """``default``, a file, or the references in the file's raw value and the file."""
        path = self._config.sources.get(key)
        if path is None:
            return DEFAULT_ORIGIN
        raw = lookup(self._raw_file(path), key)
        if not isinstance(raw, str):
            return str(path)
        references = [self._reference(match) for match in VARIABLE_REFERENCE.finditer(raw)]
        named = [reference for reference in references if reference]
        if not named:
            return str(path)
        return f"{', '.join(named)} in {path}"

    def _reference(self, match: Any) -> str | None:
        name, default = match["name"], match["default"]
        if name is None:
            return None
        value = self._env.get(name)
        if default is None:
            return f"${{{name}}}"
        if value:
            return f"${{{name}}}"
        return f"${{{name}:-{default}}} ({name} unset, so the default)"

    def _raw_file(self, path: Path) -> Any:
        if path not in self._raw:
            try:
                text = read_small_text(path)
                self._raw[path] = load_bounded(text) if text is not None else None
            except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
                self._raw[path] = None
        return self._raw[path]
