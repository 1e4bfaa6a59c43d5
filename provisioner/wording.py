"""Which memory tools a text names, for the wording lint (GOLD-5) and the contract fixture.

A text names a memU tool when it writes ``mcp__nerve__<tool>`` or the bare tool name in
backticks; prose such as "memorize this" is not a tool name. Any ``loom_<word>`` token is a
Loom tool name wherever it stands, because Loom's tools all carry that prefix and no other word
in our texts does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from provisioner.backends import LOOM_TOOL_PREFIX, MEMU_TOOLS, NERVE_SERVER, get_backend

_LOOM_TOOL = re.compile(rf"(?<![A-Za-z0-9]){LOOM_TOOL_PREFIX}[a-z0-9]+(?:_[a-z0-9]+)*")
_MEMU_ALTERNATION = "|".join(MEMU_TOOLS)
_MEMU_TOOL = re.compile(
    rf"mcp__{NERVE_SERVER}__(?P<qualified>{_MEMU_ALTERNATION})\b|`(?P<bare>{_MEMU_ALTERNATION})`"
)


def loom_tools_named(text: str) -> set[str]:
    """Every ``loom_*`` tool name that ``text`` mentions."""
    return set(_LOOM_TOOL.findall(text))


def memu_tools_named(text: str) -> set[str]:
    """Every memU tool (BACK-3) that ``text`` names as a tool."""
    return {match["qualified"] or match["bare"] for match in _MEMU_TOOL.finditer(text)}


@dataclass(frozen=True)
class WordingProblem:
    """One text naming a tool its backend's wording must not name."""

    text_name: str
    backend: str
    tool: str
    reason: str

    def __str__(self) -> str:
        return f"{self.text_name}: names {self.tool!r} ({self.reason})"


def lint_text(
    text_name: str, text: str, backend: str, loom_core: Iterable[str]
) -> list[WordingProblem]:
    """The GOLD-5 problems of one rendered text of ``backend``.

    * a memU text names no ``loom_*`` tool;
    * a Loom text names none of memU's nine tools;
    * every ``loom_*`` tool a Loom text names is in Loom's default (``core``) list.
    """
    get_backend(backend)  # an unknown backend is a caller error, not a lint finding
    problems: list[WordingProblem] = []
    core = frozenset(loom_core)
    for tool in sorted(loom_tools_named(text)):
        if backend != "loom":
            problems.append(WordingProblem(text_name, backend, tool, "a Loom tool in memU wording"))
        elif tool not in core:
            problems.append(
                WordingProblem(text_name, backend, tool, "not in Loom's default tool list")
            )
    if backend == "loom":
        for tool in sorted(memu_tools_named(text)):
            problems.append(WordingProblem(text_name, backend, tool, "a memU tool in Loom wording"))
    return problems
