"""The wording lint (GOLD-5): a text names only tools its own backend may name.

Each backend of the registry knows how its tool names look in a text (``Backend.tools_named``)
and which it may name (``Backend.nameable_tools``). A text of backend B is wrong when it names
a tool of another backend that B may not name (memU wording names no ``loom_*`` tool; Loom
wording names none of memU's nine tools), or a tool of B's own that B may not name (a
``loom_*`` tool outside Loom's default list). A runtime text worded from the gateway catalog
is also wrong when it names a tool outside the set it was rendered for
(``lint_catalog_worded``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from provisioner.backends import BACKENDS, get_backend
from provisioner.templating.folder import ACTIVE_FOLDER

if TYPE_CHECKING:
    from provisioner.templating.texts import RuntimeText


def loom_tools_named(text: str) -> set[str]:
    """Every ``loom_*`` tool name that ``text`` mentions."""
    return BACKENDS["loom"].tools_named(text)


def memu_tools_named(text: str) -> set[str]:
    """Every memU tool (BACK-3) that ``text`` names as a tool."""
    return BACKENDS["memu"].tools_named(text)


@dataclass(frozen=True)
class WordingProblem:
    """One text naming a tool its backend's wording must not name."""

    text_name: str
    backend: str
    tool: str
    reason: str

    def __str__(self) -> str:
        return f"{self.text_name}: names {self.tool!r} ({self.reason})"


@dataclass(frozen=True)
class NamedTool:
    """One tool a text names, and the backend whose sessions are offered it."""

    tool: str
    owner: str

    @property
    def ref(self) -> str:
        """The name the agent calls it by, such as ``mcp__nerve__memorize``."""
        return get_backend(self.owner).tool_ref(self.tool)


def tools_not_nameable(text: str, nameable: Iterable[str]) -> list[NamedTool]:
    """Every tool of any backend that ``text`` names and that is not in ``nameable``.

    Sorted by owner (registry order) and then tool. The one place a text is compared with a
    backend's tool list: ``lint_text`` words it for the goldens (GOLD-5), doctor for the
    workspace's own files (OPS-2, through ``places_not_nameable``).
    """
    found = {named for _offset, named in places_not_nameable(text, nameable)}
    order = list(BACKENDS)
    return sorted(found, key=lambda named: (order.index(named.owner), named.tool))


def places_not_nameable(text: str, nameable: Iterable[str]) -> Iterator[tuple[int, NamedTool]]:
    """Where ``text`` names a tool outside ``nameable``: each mention's offset, and the tool.

    Mentions come backend by backend (registry order), each backend's in text order; a tool
    named twice is yielded twice. Costs one pass of each backend's pattern over the text.
    """
    allowed = frozenset(nameable)
    for backend in BACKENDS.values():
        for match in backend.tool_pattern.finditer(text):
            # As Backend.tools_named reads it: the named group that matched is the name.
            tool = next(value for value in match.groupdict().values() if value)
            if tool not in allowed:
                yield match.start(), NamedTool(tool, backend.name)


def lint_text(
    text_name: str, text: str, backend: str, nameable: Mapping[str, Iterable[str]]
) -> list[WordingProblem]:
    """The GOLD-5 problems of one rendered text of ``backend``, sorted by tool.

    ``nameable`` maps every backend name to the tools its wording may name (see
    ``nameable_by_backend``); tests pass their own lists.
    """
    own = get_backend(backend)
    problems: list[WordingProblem] = []
    for named in tools_not_nameable(text, nameable[backend]):
        other = get_backend(named.owner)
        reason = (
            f"not in {own.display_name}'s default tool list"
            if other is own
            else f"a {other.display_name} tool in {own.display_name} wording"
        )
        problems.append(WordingProblem(text_name, backend, named.tool, reason))
    return sorted(problems, key=lambda problem: (problem.tool, problem.reason))


def nameable_by_backend() -> dict[str, frozenset[str]]:
    """What each backend's wording may name, from the registry (BACK-3, BACK-4)."""
    return {name: backend.nameable_tools(ACTIVE_FOLDER) for name, backend in BACKENDS.items()}


def lint_catalog_worded(texts: Iterable[RuntimeText]) -> list[WordingProblem]:
    """GOLD-5 for texts worded from a catalog (TXT-3, TXT-5), sorted by text and tool.

    Such a text may name only the tools of its own backend that were in the set it was
    rendered for: a session is never sent after a tool its client was not granted. Texts not
    worded from a catalog (``loom_tools is None``) are left to ``lint_text``.
    """
    problems: list[WordingProblem] = []
    for text in texts:
        if text.loom_tools is None:
            continue
        backend = get_backend(text.backend)
        granted = ", ".join(sorted(text.loom_tools)) or "no tools"
        reason = f"not in the catalog this text was worded for: {granted}"
        for tool in sorted(backend.tools_named(text.body) - text.loom_tools):
            name = f"{text.backend}/texts/{text.file_name}"
            problems.append(WordingProblem(name, text.backend, tool, reason))
    return sorted(problems, key=lambda problem: (problem.text_name, problem.tool))


def lint_runtime_texts(backends: Iterable[str]) -> list[WordingProblem]:
    """``lint_catalog_worded`` over every runtime text of ``backends``, as rendered now."""
    from provisioner.templating.texts import all_texts  # deferred: rendering loads Jinja

    chosen = frozenset(backends)
    return lint_catalog_worded(text for text in all_texts() if text.backend in chosen)
