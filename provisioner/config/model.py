"""What loading the configuration gives: the ``Config``, its files, and ``ConfigError``.

The loader builds these; the expansion and the key checks raise ``ConfigError``. Each error's
text is one line naming the file, the dotted key, what is wrong and what would be accepted, so
the CLI prints it and exits with status 2 instead of showing a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioner.backends import LoomSettings
from provisioner.base.errors import UserError
from provisioner.runtime.face import masked


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
        self.problem = masked(single_line(problem))  # REL-14: whatever value it quotes
        self.line = line
        self.missing: tuple[str, ...] = ()  # CONF-2: the unset required variables, if any
        super().__init__(located(path, key, self.problem))


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
        return source_of(self.sources, key)


def source_of(sources: Mapping[str, Path], key: str) -> Path | None:
    """The file that set ``key``, or the highest file that set something under it."""
    if key in sources:
        return sources[key]
    below = [path for leaf, path in sources.items() if leaf.startswith(key + ".")]
    return below[-1] if below else None


def located(path: Path | None, key: str | None, problem: str) -> str:
    """``file: key: problem``, leaving out what is not known; no URL's credentials (REL-14)."""
    return masked(": ".join(str(part) for part in (path, key, problem) if part is not None))


def single_line(text: str) -> str:
    """``text`` with its line breaks turned into spaces."""
    return " ".join(text.splitlines())


def kind_of(value: Any) -> str:
    """How a YAML value reads in an error: 'a list', 'a string', …"""
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    kinds.update({list: "a list", dict: "a mapping"})
    return kinds.get(type(value), f"a {type(value).__name__}")


def joined_key(prefix: str, key: Any) -> str:
    """``prefix.key``, or ``key`` at the top level."""
    return f"{prefix}.{key}" if prefix else str(key)
