"""``nerve doctor``: what a person needs to know about one Nerve instance's memory (DOC-1).

Each check is one ``Check``: an id such as ``config.files`` or ``loom.catalog``, a status
(``OK``, ``WARN`` or ``ERR``), a one-line message and, for every WARN and ERR, one line of what
to do about it. The checks come from four modules, one job each:

* ``doctor_config``: which configuration files were read, and where each memory value came
  from (a layer, or the ``${VAR}`` a layer names);
* ``doctor_workspace``: the workspace's recorded profile and wording, and its files;
* ``doctor_memory``: the backend's own checks that need no network (memU's store and key;
  Loom's gateway URL, dashboard link and the sweep's state);
* ``doctor_network``: under Loom, the catalog and the health probe, run concurrently, each
  within its deadline.

Every text that reaches a check — a config value, a namespace Loom named, a gateway's error —
is made one printable line here, when the ``Check`` is built, so the text output and the JSON
carry the same words and nothing can start a line of its own or send a terminal escape.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OK = "OK"
WARN = "WARN"
ERR = "ERR"
STATUSES = (OK, WARN, ERR)
JSON_SCHEMA_VERSION = 1  # DOC-1: {"schema": 1, "checks": [...], "summary": {...}}
EXIT_CLEAN = 0  # DOC-1: no ERR
EXIT_ERRORS = 1  # DOC-1: at least one ERR
TEXT_MAX_CHARS = 400  # our choice: a message longer than this is cut, ending in "…"
TAG_WIDTH = len("[WARN]")
ADVICE_PREFIX = " " * (TAG_WIDTH + 1) + "→ "


def one_line(text: str, max_chars: int = TEXT_MAX_CHARS) -> str:
    """``text`` as one printable line: line breaks, tabs, escapes and invisible characters are
    shown as ``\\xNN``/``\\uNNNN`` instead of acting, and a long text is cut with ``…``.
    """
    shown = "".join(char if char.isprintable() else _escaped(char) for char in text)
    if len(shown) > max_chars:
        return shown[: max_chars - 1] + "…"
    return shown


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report, and its advice.

    ``source`` says where the checked value came from (a file, ``${VAR}`` in a file, the
    workspace manifest, the gateway), or None. Text fields are made one line on construction.
    Raises ``ValueError`` for an unknown status, or a WARN or ERR without advice.
    """

    id: str
    status: str
    message: str
    advice: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")
        if self.status != OK and not self.advice:
            raise ValueError(f"check {self.id} is {self.status} and says nothing to do")
        for name in ("message", "advice", "source"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, one_line(value))

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": self.status,
            "message": self.message,
            "advice": self.advice,
            "source": self.source,
        }


@dataclass(frozen=True)
class Report:
    """Every check of one run, in the order they are printed."""

    checks: tuple[Check, ...]

    def count(self, status: str) -> int:
        return sum(1 for check in self.checks if check.status == status)

    @property
    def exit_status(self) -> int:
        """1 when any check is ERR, else 0 (DOC-1)."""
        return EXIT_ERRORS if self.count(ERR) else EXIT_CLEAN

    def summary(self) -> dict[str, int]:
        return {
            "passed": self.count(OK),
            "total": len(self.checks),
            "warnings": self.count(WARN),
            "errors": self.count(ERR),
            "exit_status": self.exit_status,
        }

    def as_json(self) -> dict[str, Any]:
        """The report in the ``--json`` schema of DOC-1."""
        return {
            "schema": JSON_SCHEMA_VERSION,
            "checks": [check.as_json() for check in self.checks],
            "summary": self.summary(),
        }

    def as_text(self) -> str:
        """One line per check, its advice under each WARN and ERR, and ``N/M checks passed``."""
        lines: list[str] = []
        for check in self.checks:
            tag = f"[{check.status}]".ljust(TAG_WIDTH)
            lines.append(f"{tag} {check.id}: {check.message}")
            if check.advice:
                lines.append(f"{ADVICE_PREFIX}{check.advice}")
        lines.append(f"{self.count(OK)}/{len(self.checks)} checks passed")
        return "\n".join(lines) + "\n"


def local_checks(
    config_dir: Path, workspace: Path, env: Mapping[str, str]
) -> tuple[list[Check], Any]:
    """Every check that needs no network, and the loaded ``Config`` (None if it did not load).

    Never raises for a bad configuration or workspace: those are ERR checks.
    """
    from provisioner import doctor_config, doctor_memory, doctor_workspace

    config, checks = doctor_config.config_checks(config_dir, workspace, env)
    checks += doctor_workspace.workspace_checks(workspace, config_dir, config)
    if config is not None:
        checks += doctor_memory.memory_checks(config, workspace, config_dir)
    return checks, config


async def network_checks(config: Any) -> list[Check]:
    """Under Loom with a gateway URL, the catalog and health checks, run concurrently."""
    from provisioner import doctor_network

    return await doctor_network.network_checks(config)


def run_doctor(config_dir: Path, workspace: Path, env: Mapping[str, str] | None = None) -> Report:
    """Every check, the network ones included (``run_doctor_offline`` leaves them out)."""
    checks, config = local_checks(config_dir, workspace, os.environ if env is None else env)
    if config is not None:
        checks += asyncio.run(network_checks(config))
    return Report(tuple(checks))


def run_doctor_offline(
    config_dir: Path, workspace: Path, env: Mapping[str, str] | None = None
) -> Report:
    """The checks that need no network: nothing is sent anywhere (DOC-1 ``--offline``)."""
    checks, _config = local_checks(config_dir, workspace, os.environ if env is None else env)
    return Report(tuple(checks))


def lookup(data: Any, dotted: str) -> Any:
    """The value at a dotted key of nested mappings, or None when any part is missing."""
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def joined(items: Iterable[str], empty: str = "none") -> str:
    """``a, b, c``, or ``empty`` when there is nothing to list."""
    listed = list(items)
    return ", ".join(listed) if listed else empty
