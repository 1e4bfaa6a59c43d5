"""Reading a YAML file someone else wrote, at a bounded cost (CONF-8).

A configuration file may come from a hostile workspace. YAML aliases let a few hundred bytes
stand for billions of nodes (an "alias bomb"), an alias may refer to the node that contains it,
and deep nesting exhausts Python's stack in the composer. So before anything is built, the
file's events are walked once, without recursion, counting what it would cost once every alias
is expanded; a file beyond ``MAX_NODES``, ``MAX_ALIASES`` or ``MAX_DEPTH`` is refused, and so
is an alias inside its own anchor. Only then is the document constructed, with every mapping
checked for a key written twice.

Failures raise ``YamlLimitError`` with the problem and, when known, the 1-based line; the
caller names the file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from provisioner.base.errors import UserError

MAX_BYTES = 1024 * 1024  # CONF-8: a configuration file is a few kilobytes
MAX_DEPTH = 64  # CONF-8: nesting of mappings and lists
MAX_ALIASES = 256  # CONF-8: alias uses in one file
MAX_NODES = 100_000  # CONF-8: nodes once every alias is expanded

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present


class YamlLimitError(UserError, ValueError):
    """A YAML text that is too costly or ambiguous to read; ``line`` is 1-based or None."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


def read_small_text(path: Path, max_bytes: int = MAX_BYTES) -> str | None:
    """The UTF-8 text of the regular file at ``path``; None when nothing is there.

    A FIFO, device or folder is refused before it is read (reading a FIFO would hang), and so
    is a file over ``max_bytes``. Raises ``YamlLimitError`` for those, ``OSError`` for other
    failures and ``UnicodeDecodeError`` for text that is not UTF-8.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        handle = os.fdopen(fd, "rb")  # a folder raises IsADirectoryError, as reading it would
    except BaseException:
        os.close(fd)
        raise
    with handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device: never read
            raise YamlLimitError("is not a regular file; expected a YAML file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YamlLimitError(f"is larger than {max_bytes} bytes; expected a smaller file")
    return data.decode("utf-8")


@dataclass
class _Frame:
    anchor: str | None
    nodes: int = 1


# PyYAML 6.0.4 and later refuse a flow nested past their own limit while scanning, before an
# event reaches the depth count below; that refusal is this limit's too.
_SCANNER_NESTING_PROBLEM = "maximum nesting depth"


def _events(text: str) -> Iterator[yaml.Event]:
    """``text``'s parse events; PyYAML's own refusal of deep nesting as ``YamlLimitError``."""
    try:
        yield from yaml.parse(text, Loader=_BaseLoader)
    except yaml.MarkedYAMLError as error:
        if _SCANNER_NESTING_PROBLEM not in (error.problem or ""):
            raise
        mark = error.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise YamlLimitError(f"nesting deeper than {MAX_DEPTH} levels", line) from None


def check_cost(text: str) -> None:
    """Refuse ``text`` when its expanded size, alias count or depth is beyond the limits."""
    anchors: dict[str, int] = {}
    stack: list[_Frame] = []
    total = aliases = 0
    for event in _events(text):
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Frame(event.anchor))
            if len(stack) > MAX_DEPTH:
                raise YamlLimitError(f"nesting deeper than {MAX_DEPTH} levels", line)
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            frame = stack.pop()
            nodes = frame.nodes
            if frame.anchor is not None:
                anchors[frame.anchor] = nodes
        elif isinstance(event, yaml.ScalarEvent):
            nodes = 1
            if event.anchor is not None:
                anchors[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise YamlLimitError(f"more than {MAX_ALIASES} aliases", line)
            if any(frame.anchor == event.anchor for frame in stack):
                raise YamlLimitError(f"alias *{event.anchor} refers to a node containing it", line)
            nodes = anchors.get(str(event.anchor), 1)
        else:
            continue
        if stack:
            stack[-1].nodes += nodes
        total += nodes
        if total > MAX_NODES or (stack and stack[-1].nodes > MAX_NODES):
            raise YamlLimitError(f"expands to more than {MAX_NODES} nodes (aliases)", line)


class _NoDuplicateKeysLoader(_BaseLoader):  # type: ignore[misc,valid-type]
    """A safe loader that refuses a mapping with a key written twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen.setdefault(key, line)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not None:
                raise YamlLimitError(
                    f"key {key!r} appears twice in one mapping (lines {first} and {line}); "
                    "expected each key once",
                    line,
                )
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def load_bounded(text: str) -> Any:
    """The document in ``text``, after ``check_cost``; raises ``YamlLimitError`` or YAMLError."""
    check_cost(text)
    return yaml.load(text, Loader=_NoDuplicateKeysLoader)
