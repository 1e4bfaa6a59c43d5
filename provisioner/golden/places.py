"""Where in the templates a wording problem was written (GOLD-5).

The wording lint reads rendered text, but an author edits partials: "memu/worker/AGENTS.md
names loom_search" leaves them to guess which of the pieces included into AGENTS.md says it.
Partials are included by a name built at render time (``"partials/" ~ memory_backend ~ …``), so
the include graph cannot be read off the templates; instead each rendered line that names the
tool is looked up in the template files themselves:

1. a template line that renders to it: its literal text equal to the rendered line's, each
   ``{{ … }}``/``{% … %}`` in it standing for any text (indentation ignored, since an
   ``indent`` filter moves a partial's lines);
2. else a template line naming the same tool literally.

Partials of the text's own backend are listed first. A line matched by neither (a tool name
assembled by Jinja from pieces) is reported by its rendered line alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from provisioner.backends import BACKENDS
from provisioner.templating.wording import WordingProblem
from provisioner.workspace.render import RenderedFile

TEMPLATE_FOLDERS = ("templates", "skills")  # searched below the rendered folder's root
MIN_LITERAL_CHARACTERS = 8  # a template line with less fixed text than this matches too much
_JINJA_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}")


@dataclass(frozen=True)
class Place:
    """A line of a template file, as ``path:line`` relative to the rendered folder."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class WordingPlace:
    """Where one wording problem is: its first rendered line, and the template lines behind it."""

    rendered_line: int | None
    sources: tuple[Place, ...]


@dataclass(frozen=True)
class _SourceLine:
    path: str
    number: int
    text: str  # stripped

    @cached_property
    def pattern(self) -> re.Pattern[str] | None:
        """The rendered lines this line can produce, or None when it is mostly Jinja."""
        literals = _JINJA_TAG.split(self.text)
        if sum(len(piece.strip()) for piece in literals) < MIN_LITERAL_CHARACTERS:
            return None
        return re.compile(".*?".join(re.escape(piece) for piece in literals), re.DOTALL)


class TemplateLines:
    """Every line of the template files below ``root``, read once."""

    def __init__(self, root: Path) -> None:
        self.lines: list[_SourceLine] = []
        for folder in TEMPLATE_FOLDERS:
            for path in sorted((root / folder).rglob("*")):
                if path.is_file() and not path.is_symlink():
                    self._read(path, path.relative_to(root).as_posix())

    def _read(self, path: Path, name: str) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return  # not a text template: nothing in it can be a rendered line
        for number, line in enumerate(text.split("\n"), 1):
            if line.strip():
                self.lines.append(_SourceLine(name, number, line.strip()))

    def behind(self, rendered_line: str, tool: str, backend: str) -> tuple[Place, ...]:
        """The template lines that produce ``rendered_line`` (see the module's two steps)."""
        wanted = rendered_line.strip()
        found = [
            line
            for line in self.lines
            if line.pattern is not None and line.pattern.fullmatch(wanted) is not None
        ]
        if not found:
            found = [line for line in self.lines if tool in tools_named(line.text)]
        own = f"templates/partials/{backend}/"
        ranked = sorted(found, key=lambda line: (not line.path.startswith(own), line.path))
        return tuple(Place(line.path, line.number) for line in ranked)


def tools_named(text: str) -> set[str]:
    """Every tool of any registered backend that ``text`` names."""
    return set().union(*(backend.tools_named(text) for backend in BACKENDS.values()))


def wording_places(
    problems: Iterable[WordingProblem], rendered: Mapping[str, RenderedFile], root: Path
) -> dict[WordingProblem, WordingPlace]:
    """Where each problem is: the rendered line naming the tool, and the template lines.

    ``rendered`` is keyed by golden path (a problem's ``text_name``); ``root`` is the folder
    that was rendered. A problem whose text is not in ``rendered`` gets no rendered line.
    """
    problems = list(problems)
    if not problems:
        return {}
    templates = TemplateLines(root)
    places: dict[WordingProblem, WordingPlace] = {}
    for problem in problems:
        file = rendered.get(problem.text_name)
        text = file.content.decode("utf-8", errors="replace") if file else ""
        numbers: list[int] = []
        sources: list[Place] = []
        for number, line in enumerate(text.split("\n"), 1):
            if problem.tool in tools_named(line):
                numbers.append(number)
                sources += [
                    place
                    for place in templates.behind(line, problem.tool, problem.backend)
                    if place not in sources
                ]
        places[problem] = WordingPlace(numbers[0] if numbers else None, tuple(sources))
    return places
