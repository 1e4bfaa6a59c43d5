"""The package's own records in a workspace, read strictly (REL-12).

Init keeps three records below ``.nerve/``: the manifest (``provisioned.json``: the answers and
the digest of every file init counts as its own), the journal of a run under way
(``journal.json``) and the merge bases (``bases.json``). The workspace belongs to the agent,
which can write all three, and a disk can damage them. A record is only ever read here, and
only as what the package writes:

* at most ``RECORD_MAX_BYTES`` (the workspace's read cap), UTF-8, JSON;
* a JSON object, nested no deeper than ``RECORD_MAX_DEPTH`` (a record nests three deep; a
  deeper one is refused before any code walks it, so no ``RecursionError`` ever escapes);
* naming the format this version writes, where the record names one.

Anything else raises ``RecordDamaged``: one line naming the file, what is wrong with it, what
was expected and what to do, with exit status 2 (a file to look at, REL-4). A damaged record is
never read as an absent one: an absent manifest means a new workspace, so init would fall back
to the default answers (a worker would gain a personal profile's files) and count every file
as edited for good.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from provisioner.base.errors import UserError
from provisioner.workspace.fs import MAX_READ_BYTES, WorkspaceRoot

RECORD_MAX_BYTES = MAX_READ_BYTES  # REL-12: past the read cap a record cannot be read whole
RECORD_MAX_DEPTH = 16  # REL-12, our choice: init's records nest three deep


class RecordDamaged(UserError, ValueError):
    """A record of the package in a workspace is not what the package writes (REL-12).

    Nothing was written. ``str()`` is one line: ``what`` (the file and the damage), then
    ``advice`` (what the person does about it), which doctor shows apart.
    """

    def __init__(self, what: str, advice: str) -> None:
        super().__init__(f"{what}. {advice}")
        self.what = what
        self.advice = advice


@dataclass(frozen=True)
class RecordKind:
    """One of init's records: where it lives, what it is, and what to do when it is damaged."""

    relative: str  # below the workspace, with ``/`` separators
    what: str  # "the manifest nerve-provisioner init writes"
    advice: str  # one sentence: what the person does about a damaged one
    format: int | None = None  # the format it must name; None: it names none


def read_record(root: WorkspaceRoot, kind: RecordKind) -> dict[str, Any] | None:
    """The record ``kind`` as a JSON object, or None when the workspace has no such file.

    A link or a non-file at its path is ``WorkspaceRefused`` (``WorkspaceRoot.read``); a fault
    of the machine is a ``FileFault``; anything not as described in the module docstring is
    ``RecordDamaged``.
    """
    found = root.read(kind.relative)
    if found is None:
        return None
    content = found[0]
    if len(content) > RECORD_MAX_BYTES:
        raise damaged(root, kind, f"larger than {RECORD_MAX_BYTES // (1024 * 1024)} MiB")
    try:
        document = json.loads(content.decode("utf-8"))
    except UnicodeDecodeError:
        raise damaged(root, kind, "not UTF-8 text") from None
    except RecursionError:
        raise damaged(root, kind, "nested too deep") from None
    except json.JSONDecodeError as error:
        raise damaged(root, kind, f"not JSON ({error.msg}, line {error.lineno})") from None
    except ValueError:  # a number too long to convert, and the like
        raise damaged(root, kind, "not JSON this package writes") from None
    if not isinstance(document, dict):
        raise damaged(root, kind, f"a JSON {_kind_of(document)}, not an object")
    if _deeper_than(document, RECORD_MAX_DEPTH):
        raise damaged(root, kind, f"nested deeper than {RECORD_MAX_DEPTH} levels")
    if kind.format is not None:
        _check_format(root, kind, document.get("format"))
    return document


def damaged(root: WorkspaceRoot, kind: RecordKind, problem: str) -> RecordDamaged:
    """The one line for the record ``kind`` when ``problem`` is what is wrong with it."""
    return RecordDamaged(
        f"{root.path / kind.relative}: damaged: {problem}; expected {kind.what}", kind.advice
    )


def string_map(
    root: WorkspaceRoot, kind: RecordKind, document: dict[str, Any], key: str
) -> dict[str, str]:
    """``document[key]``, which must be an object of text values."""
    value = document.get(key)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise damaged(root, kind, f'"{key}" is not an object of text values')
    return dict(value)


def object_at(
    root: WorkspaceRoot, kind: RecordKind, document: dict[str, Any], key: str
) -> dict[str, Any]:
    """``document[key]``, which must be an object."""
    value = document.get(key)
    if not isinstance(value, dict):
        raise damaged(root, kind, f'"{key}" is not an object')
    return dict(value)


def _check_format(root: WorkspaceRoot, kind: RecordKind, found: object) -> None:
    if found == kind.format and type(found) is int:
        return
    if type(found) is int and kind.format is not None and found > kind.format:
        raise RecordDamaged(
            f"{root.path / kind.relative}: written by a newer version of nerve-provisioner "
            f"(format {found}; this version reads format {kind.format}); left as it is",
            "Use that version",
        )
    shown = json.dumps(found)[:40] if found is not None else "none"
    raise damaged(root, kind, f"format {shown} is unknown")


def _deeper_than(document: object, limit: int) -> bool:
    """Whether ``document`` nests more than ``limit`` objects or arrays deep (walked without
    recursion, so the walk itself cannot overflow)."""
    pending: list[tuple[object, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        children: Any
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


def _kind_of(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"
