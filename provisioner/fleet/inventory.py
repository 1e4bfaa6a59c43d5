"""The fleet's inventory: which workspaces, with which configuration (FLEET-1, REL-13).

A YAML or JSON file holding a list of mappings, one per workspace:

    - workspace: instances/orbit/workspace      # required
      config_dir: instances/orbit/config        # required
      memory_backend: loom                      # optional, as init's --memory-backend
      profile: worker                           # optional, as init's --profile
      create: true                              # optional: provision it if it is not there

Relative paths are relative to the inventory file's folder, so an inventory moves with the
folders it names; a leading ``~`` is the home folder. An inventory that is not such a list is
refused as a whole, before any workspace is read, with one line naming the entry, what is
wrong and what is expected: a run that skipped a misspelt entry would report a fleet up to
date that is not.

The file may come from anyone, so it is read at a bounded cost (REL-13): only a regular file
(a FIFO would hang the read, a device would be read until memory runs out), at most
``MAX_INVENTORY_BYTES``, and YAML through the configuration's bounded reader (aliases,
nesting and expanded size counted before anything is built). A path holding a NUL or a
character the file system cannot encode, a filesystem root or a system folder is refused by
its entry.

What the inventory cannot say alone is judged per workspace when the run reaches it
(``workspace_refusal``): a workspace folder that is missing or empty is not provisioned yet
(an ``error``, unless its entry says ``create: true``), and a non-empty folder holding no
workspace is never written to.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from provisioner.backends import BACKEND_NAMES, PROFILES
from provisioner.base.errors import UserError
from provisioner.config.bounded_yaml import YamlLimitError, load_bounded, read_small_text
from provisioner.workspace.render import MANIFEST_PATH

REQUIRED_KEYS = ("workspace", "config_dir")  # FLEET-1
OPTIONAL_KEYS = ("memory_backend", "profile", "create")  # FLEET-1, REL-13
CREATE_KEY = "create"  # REL-13: the per-entry opt-in to provision a workspace not there yet
ENTRY_EXPECTED = (
    "a mapping with workspace and config_dir (paths), optional memory_backend "
    f"({', '.join(BACKEND_NAMES)}), profile ({', '.join(PROFILES)}) and create (true or false)"
)
MAX_INVENTORY_BYTES = 16 * 1024 * 1024  # REL-13: about 100,000 entries of a line each
MAX_JSON_DEPTH = 64  # REL-13: an entry is two levels deep; the YAML reader's own bound
# REL-13: folders of the operating system, never a workspace, nor anything inside them.
SYSTEM_TREES: tuple[str, ...] = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64")
SYSTEM_TREES += ("/libx32", "/proc", "/run", "/sbin", "/sys", "/usr")
# REL-13: folders that hold other things; a workspace may live below them, never be them.
SYSTEM_FOLDERS = ("/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var")


class InventoryError(UserError, ValueError):
    """An inventory the fleet cannot use; one line naming the entry (exit status 2)."""


@dataclass(frozen=True)
class Entry:
    """One workspace of the inventory: the path as given, and the paths it resolves to."""

    workspace: str
    workspace_path: Path
    config_dir: Path
    memory_backend: str | None = None
    profile: str | None = None
    create: bool = False


def read_inventory(path: Path, *, extra_keys: tuple[str, ...] = ()) -> list[Entry]:
    """The inventory's entries, in order; raises ``InventoryError`` for anything else.

    ``extra_keys`` are keys a command reads of each entry itself (``fleet switch``, FLEET-7):
    they pass the check for unknown keys and are left to that command. A machine fault reading
    the file (permission, I/O) is raised as the ``OSError`` it is, naming the file, for the
    command's status (REL-4).
    """
    text = _read(path)
    document = _parse(path, text)
    if not isinstance(document, list) or not document:
        raise InventoryError(f"{path}: not a list of workspaces; expected {_LIST}")
    entries: list[Entry] = []
    seen: dict[Path, int] = {}
    for number, item in enumerate(document, start=1):
        entry = _entry(path, number, item, extra_keys)
        where = _resolved(entry.workspace_path)
        if where in seen:
            raise InventoryError(
                f"{path}: entry {number} ({_shown(entry.workspace)}): the same workspace as "
                f"entry {seen[where]}; expected each workspace once"
            )
        seen[where] = number
        entries.append(entry)
    return entries


_LIST = f"a YAML or JSON list of workspaces, each {ENTRY_EXPECTED}"


def _read(path: Path) -> str:
    try:
        text = read_small_text(path, MAX_INVENTORY_BYTES)
    except YamlLimitError as error:
        problem = error.problem.split("; expected")[0]  # the list is what is expected here
        raise InventoryError(f"{path}: {problem}; expected {_LIST}") from None
    except UnicodeDecodeError:
        raise InventoryError(f"{path}: not UTF-8 text; expected {_LIST}") from None
    except IsADirectoryError:
        raise InventoryError(f"{path}: is a folder; expected {_LIST}") from None
    except ValueError as error:  # a NUL in the path given
        raise InventoryError(f"{_shown(str(path))}: {error}; expected {_LIST}") from None
    if text is None:
        raise InventoryError(f"{path}: no such inventory file; expected {_LIST}")
    return text


def _parse(path: Path, text: str) -> Any:
    if path.suffix == ".json":
        try:
            document = json.loads(text)
        except RecursionError:
            raise InventoryError(
                f"{path}: nesting deeper than {MAX_JSON_DEPTH} levels; expected {_LIST}"
            ) from None
        except ValueError as error:
            raise InventoryError(f"{path}: not JSON ({error}); expected {_LIST}") from None
        if _depth(document) > MAX_JSON_DEPTH:
            raise InventoryError(
                f"{path}: nesting deeper than {MAX_JSON_DEPTH} levels; expected {_LIST}"
            )
        return document
    import yaml  # deferred: only the fleet reads YAML inventories

    try:
        return load_bounded(text)
    except YamlLimitError as error:
        where = f" at line {error.line}" if error.line is not None else ""
        raise InventoryError(f"{path}{where}: {error.problem}; expected {_LIST}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InventoryError(f"{path}: not YAML{where}; expected {_LIST}") from None


def _depth(document: Any) -> int:
    """How deeply lists and mappings nest in ``document``, counted without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            if depth <= MAX_JSON_DEPTH:
                stack.extend((item, depth + 1) for item in value)
    return deepest


def _entry(path: Path, number: int, item: Any, extra_keys: tuple[str, ...] = ()) -> Entry:
    def refuse(problem: str) -> InventoryError:
        named = item.get("workspace") if isinstance(item, dict) else None
        label = f" ({_shown(named)})" if isinstance(named, str) and named else ""
        return InventoryError(
            f"{path}: entry {number}{label}: {problem}; expected {ENTRY_EXPECTED}"
        )

    if not isinstance(item, dict):
        raise refuse(f"is {type(item).__name__}, not a mapping")
    known = (*REQUIRED_KEYS, *OPTIONAL_KEYS, *extra_keys)
    unknown = sorted(_shown(str(key)) for key in item if key not in known)
    if unknown:
        raise refuse(f"unknown key {', '.join(unknown)}")
    paths: dict[str, Path] = {}
    for key in REQUIRED_KEYS:
        if key not in item:
            raise refuse(f"{key} is missing")
        value = item[key]
        if not isinstance(value, str) or not value.strip():
            raise refuse(f"{key} is not a path")
        problem = _path_problem(value)
        if problem:
            raise refuse(f"{key} {problem}")
        paths[key] = path.parent / Path(value).expanduser()
    backend = item.get("memory_backend")
    if backend is not None and backend not in BACKEND_NAMES:
        raise refuse(f"memory_backend {backend!r} is not a memory backend")
    profile = item.get("profile")
    if profile is not None and profile not in PROFILES:
        raise refuse(f"profile {profile!r} is not a profile")
    create = item.get(CREATE_KEY, False)
    if not isinstance(create, bool):
        raise refuse(f"create {create!r} is not true or false")
    system = _system_folder(paths["workspace"])
    if system:
        raise refuse(f"workspace is {system}, never a workspace")
    return Entry(
        workspace=item["workspace"],
        workspace_path=paths["workspace"],
        config_dir=paths["config_dir"],
        memory_backend=backend,
        profile=profile,
        create=create,
    )


def _path_problem(value: str) -> str:
    """What makes ``value`` unusable as a path, or ``""``: a NUL, a character the file system
    cannot encode (a lone surrogate from JSON's ``\\ud800``)."""
    if "\0" in value:
        return "holds a NUL character"
    try:
        os.fsencode(value)
    except UnicodeError:
        return "holds a character the file system cannot encode"
    return ""


def _system_folder(workspace: Path) -> str:
    """``"a filesystem root"`` or ``"the system folder /etc"`` when ``workspace`` is one, or
    lies inside one of the system's own trees; else ``""``. Links are followed."""
    for candidate in dict.fromkeys((Path(os.path.abspath(workspace)), _resolved(workspace))):
        posix = PurePosixPath(candidate.as_posix())
        if posix == PurePosixPath(posix.anchor):
            return "a filesystem root"
        if str(posix) in SYSTEM_FOLDERS:
            return f"the system folder {posix}"
        for tree in SYSTEM_TREES:
            if posix == PurePosixPath(tree) or PurePosixPath(tree) in posix.parents:
                return f"the system folder {posix}"
    return ""


def _resolved(path: Path) -> Path:
    """``path`` with its links followed as far as they lead; as it is when they loop."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


def _shown(value: Any) -> str:
    """A value from the inventory as an error line shows it: one line, quoted when odd."""
    text = str(value)
    if text.isprintable() and text.strip() == text:
        return text
    return repr(text)


def workspace_refusal(entry: Entry) -> str | None:
    """Why the fleet must not touch ``entry``'s workspace, or None (REL-13).

    A workspace is a folder ``init`` provisioned (it holds ``.nerve/provisioned.json``). A
    folder that is missing or empty is one not provisioned yet: a misspelt path must not
    provision a stray workspace while the real one stays stale, so it is an error unless the
    entry says ``create: true``. A non-empty folder holding no workspace (a home folder, a
    project) is refused whatever the entry says. A configuration folder that is missing is an
    error unless ``create: true``: init would read defaults for it and word the files for a
    backend no configuration names. What is not a folder is left to init, which names it.
    """
    workspace = entry.workspace_path
    opt_in = f"provision it with init, or set {CREATE_KEY}: true on its entry"
    if not workspace.exists() and not workspace.is_symlink():
        if not entry.create:
            return f"{workspace}: no such folder; expected a provisioned workspace ({opt_in})"
    elif workspace.is_dir():
        if (workspace / MANIFEST_PATH).exists() or (workspace / MANIFEST_PATH).is_symlink():
            pass
        elif any(workspace.iterdir()):
            return (
                f"{workspace}: holds files but no workspace ({MANIFEST_PATH} is missing); "
                "expected a folder init provisioned, or a new one"
            )
        elif not entry.create:
            return f"{workspace}: an empty folder, not provisioned yet; {opt_in}"
    if not entry.create and not entry.config_dir.exists():
        return (
            f"config_dir {entry.config_dir}: no such folder; expected the instance's "
            f"configuration folder (or {CREATE_KEY}: true on its entry)"
        )
    return None
