"""The doctor's vocabulary: a ``Check``, the ``Report`` of a run, and their text helpers.

The per-area checks (``config``, ``workspace``, ``memory``, ``sweep``, ``network``) and the
runner that gathers them all import these from here, so no check module imports the runner.
Every text that reaches a check — a config value, a namespace Loom named, a gateway's error —
is made one printable line when the ``Check`` is built, so the text output and the JSON carry
the same words and nothing can start a line of its own or send a terminal escape.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

OK = "OK"
WARN = "WARN"
ERR = "ERR"
STATUSES = (OK, WARN, ERR)
JSON_SCHEMA_VERSION = 1  # DOC-1: {"schema": 1, "status", "checks": [...], "summary": {...}}
EXIT_CLEAN = 0  # DOC-1: no ERR
EXIT_ERRORS = 1  # DOC-1: at least one ERR
TEXT_MAX_CHARS = 400  # our choice: a message longer than this is cut, ending in "…"
# our choice: advice is a command to copy, naming up to three folders; cut, it would not run
ADVICE_MAX_CHARS = 1_200
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

    ``id`` is the check's stable name (``config.files``, ``workspace.tool_names.MEMORY.md:12:
    mcp__nerve__memorize``), never its position in the report, so a monitor can follow one
    check from run to run (FLEET-4). ``source`` says where the checked value came from (a
    file, ``${VAR}`` in a file, the workspace manifest, the gateway), or None. Text fields
    are made one line on construction.
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
        for name in ("id", "message", "advice", "source"):
            value = getattr(self, name)
            if value is not None:
                limit = ADVICE_MAX_CHARS if name == "advice" else TEXT_MAX_CHARS
                object.__setattr__(self, name, one_line(value, limit))

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

    @property
    def status(self) -> str:
        """The worst status of any check: what a monitor reads first (FLEET-4)."""
        return ERR if self.count(ERR) else WARN if self.count(WARN) else OK

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
            "status": self.status,
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
