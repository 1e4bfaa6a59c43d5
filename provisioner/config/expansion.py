"""``${NAME}`` expansion and the laying of one layer over another (CONF-1, CONF-2).

Every string value of a file is expanded on its own (keys never are); an unset required
variable is gathered in ``MissingVariables`` so one error names them all. Layers merge
mapping by mapping, and every leaf remembers the file whose value won.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provisioner.config.model import ConfigError, joined_key, located

# CONF-2: `$$`, `${NAME}`, `${NAME:-default}`; a `${` that fits neither is malformed.
VARIABLE_REFERENCE = re.compile(
    r"\$(?:(?P<dollar>\$)"
    r"|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
    r"|(?P<malformed>\{))"
)


class MissingVariables:
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
        problem = "; ".join([first_problem, *(located(p, k, m) for p, k, m in others)])
        error = ConfigError(
            first_path,
            first_key,
            f"{problem}; expected each variable set in the environment, "
            "or a default written as ${NAME:-default}",
        )
        every = (name for names in self._found.values() for name in names)
        error.missing = tuple(dict.fromkeys(every))
        raise error


def expand_tree(
    value: Any, path: Path, key: str, env: Mapping[str, str], missing: MissingVariables
) -> Any:
    """A copy of ``value`` with every string expanded; keys are never expanded."""
    if isinstance(value, str):
        return expand_string(value, path, key, env, missing)
    if isinstance(value, dict):
        return {
            item_key: expand_tree(item, path, joined_key(key, item_key), env, missing)
            for item_key, item in value.items()
        }
    if isinstance(value, list):
        return [
            expand_tree(item, path, f"{key}[{index}]", env, missing)
            for index, item in enumerate(value)
        ]
    return value


def expand_string(
    text: str, path: Path, key: str, env: Mapping[str, str], missing: MissingVariables
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


def overlay(
    base: dict[Any, Any], sources: dict[str, Path], over: Mapping[Any, Any], path: Path, prefix: str
) -> None:
    """Lay ``over`` onto ``base`` in place: mappings merge, anything else replaces."""
    for key, value in over.items():
        dotted = joined_key(prefix, key)
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            overlay(base[key], sources, value, path, dotted)
            continue
        for old in [k for k in sources if k == dotted or k.startswith(dotted + ".")]:
            del sources[old]
        base[key] = value
        record_leaves(sources, value, path, dotted)


def record_leaves(sources: dict[str, Path], value: Any, path: Path, dotted: str) -> None:
    """Note ``path`` as the source of every leaf under ``dotted`` (an empty mapping is a leaf)."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            record_leaves(sources, item, path, joined_key(dotted, key))
    else:
        sources[dotted] = path
