"""The template folder a process renders from, and everything read from it (BACK-1).

A ``TemplateFolder`` holds what is read from its folder: the folder's location, Loom's core
tool list, the registry of shipped memU prompts, and whatever a module derives from the
folder through ``folder_cached`` (the questions of ``copier.yml``, the Jinja environment). Each
is read on first use and kept on the object, never in a module: an operation holds the folder
it renders from (Copier's ``Template`` is the model), so a process that renders from two
folders (a test's modified copy beside the package's own) never mixes their data, and nothing
is left to forget when a copy changes. This module imports neither the questions nor the
environment: they import it.

``active_folder()`` is the folder pinned by ``rendering_from`` (``nerve golden`` pins the
checkout whose goldens it works on, OPS-1), else the folder the environment names, else the
installed package's, else the source checkout's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

from provisioner.base.errors import UserError

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the provisioner package
WHEEL_ASSETS = PACKAGE_DIR / "_assets"
CHECKOUT_ROOT = PACKAGE_DIR.parent
ASSETS_ENV = "NERVE_ASSETS_DIR"  # a folder with templates/ and skills/ to render from instead
COPIER_FILE = "copier.yml"
SHIPPED_PROMPTS_NAME = "shipped-memu-prompts.json"  # TXT-7: in templates/
LOOM_FIXTURE_NAME = "loom_lifecycle_ops.json"  # BACK-4, CON-1
CHECKOUT_FIXTURE = Path("tests", "fixtures", LOOM_FIXTURE_NAME)  # where a checkout keeps it
# The package's own copy, installed with it (a test keeps it identical to the checkout's).
PACKAGED_FIXTURE = Path(__file__).resolve().parent / LOOM_FIXTURE_NAME


T = TypeVar("T")


class AssetsMissing(UserError, RuntimeError):
    """The templates are neither in the installed package nor in a source checkout."""


class ContractFixtureError(UserError, RuntimeError):
    """The Loom contract fixture is missing or unreadable, so Loom's tool list is unknown."""


class TemplateFolder:
    """A folder holding ``templates/`` and ``skills/``, and what is read from it, once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._derived: dict[Callable[[TemplateFolder], Any], Any] = {}

    def derived(self, read: Callable[[TemplateFolder], T]) -> T:
        """``read(self)``, computed once per folder and kept (see ``folder_cached``)."""
        if read not in self._derived:
            self._derived[read] = read(self)
        value: T = self._derived[read]
        return value

    @property
    def template_dir(self) -> Path:
        """The Copier template (the folder holding ``copier.yml``)."""
        return self.root / "templates"

    @property
    def skills_dir(self) -> Path:
        """The bundled skills, templated per backend (TXT-2)."""
        return self.root / "skills"

    @property
    def shipped_prompts_file(self) -> Path:
        """Where the registry of shipped memU prompts is (beside ``copier.yml``, TXT-7)."""
        return self.template_dir / SHIPPED_PROMPTS_NAME

    @property
    def loom_fixture_path(self) -> Path:
        """The Loom contract fixture this folder's templates are worded against.

        A checkout's own (``tests/fixtures/``), else the copy installed with the package.
        """
        own = self.root / CHECKOUT_FIXTURE
        if own.is_file():
            return own
        return PACKAGED_FIXTURE

    @property
    def copier_file(self) -> Path:
        """The template's questions and Copier settings."""
        return self.template_dir / COPIER_FILE

    @cached_property
    def loom_core_tools(self) -> frozenset[str]:
        """Loom's default ("core") tool list from the contract fixture (BACK-4).

        Raises ``ContractFixtureError`` when the fixture is missing or has no ``core_tools``
        list: the list is never guessed.
        """
        path = self.loom_fixture_path
        try:
            with open(path, encoding="utf-8") as handle:
                tools = json.load(handle)["core_tools"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ContractFixtureError(
                f"{path}: cannot read Loom's core tool list ({type(error).__name__}); expected "
                "the fixture written by scripts/loom_contract_fixture.py"
            ) from None
        if not isinstance(tools, list) or not all(isinstance(tool, str) for tool in tools):
            raise ContractFixtureError(f"{path}: core_tools: expected a list of tool names")
        return frozenset(tools)

    @cached_property
    def shipped_memu_prompts(self) -> dict[str, dict[str, list[str]]]:
        """``{version: {job_id: [prompt, …]}}`` as recorded; empty when the file is missing."""
        try:
            text = self.shipped_prompts_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        loaded: dict[str, dict[str, list[str]]] = json.loads(text)
        return loaded

    def forget_shipped_memu_prompts(self) -> None:
        """Drop the cached registry after it was rewritten."""
        self.__dict__.pop("shipped_memu_prompts", None)


_PINNED: list[TemplateFolder] = []  # innermost ``rendering_from`` last


def active_folder() -> TemplateFolder:
    """The folder to render from: the pinned one, else ``$NERVE_ASSETS_DIR``, else the wheel's,
    else the checkout's.

    The package's own folder is read once per process: nothing changes it while the process
    runs. A folder the variable names is a new ``TemplateFolder`` at each call, read afresh, so
    an edit there (or a change of the variable) takes effect on the next call with nothing to
    forget; an operation that reads it many times holds the one it got (an init's
    ``TemplateRenderer``) or pins it (``rendering_from``). Raises ``AssetsMissing`` when the
    chosen folder has no ``templates/copier.yml``.
    """
    if _PINNED:
        return _PINNED[-1]
    override = os.environ.get(ASSETS_ENV) or ""
    if override:
        return TemplateFolder(_locate(override))
    return _package_folder()


@cache
def _package_folder() -> TemplateFolder:
    """The installed package's folder, else the source checkout's: one per process."""
    return TemplateFolder(_locate(""))


@contextmanager
def rendering_from(root: Path) -> Iterator[TemplateFolder]:
    """Make ``root`` (holding ``templates/`` and ``skills/``) the active folder inside the block.

    Whatever the install, ``nerve golden`` must render the templates of the checkout whose
    goldens it compares (OPS-1), not the copy an installed wheel carries. The folder is read
    afresh for each block and kept for the block's length. Raises ``AssetsMissing``, before
    anything renders, when ``root`` lacks either folder: a render mixing the checkout's
    templates with the installed skills would be no checkout's.
    """
    root = root.resolve()
    missing = [
        name
        for name, present in (
            (f"templates/{COPIER_FILE}", (root / "templates" / COPIER_FILE).is_file()),
            ("skills/", (root / "skills").is_dir()),
        )
        if not present
    ]
    if missing:
        raise AssetsMissing(
            f"{root}: no {' and no '.join(missing)} there; expected templates/ and skills/ "
            "to render from"
        )
    folder = TemplateFolder(root)
    _PINNED.append(folder)
    try:
        yield folder
    finally:
        _PINNED.pop()


def _locate(override: str) -> Path:
    if override:
        root = Path(override).expanduser().resolve()
        if (root / "templates" / COPIER_FILE).is_file():
            return root
        raise AssetsMissing(f"{ASSETS_ENV}={override}: no templates/{COPIER_FILE} there")
    for root in (WHEEL_ASSETS, CHECKOUT_ROOT):
        if (root / "templates" / COPIER_FILE).is_file():
            return root
    raise AssetsMissing(
        f"templates not found under {WHEEL_ASSETS} or {CHECKOUT_ROOT}; "
        "expected an intact install of nerve-provisioner"
    )


class FolderValue(Generic[T]):
    """A value of a template folder: called bare, the active folder's; ``of(folder)``, that
    folder's, for an operation that holds its own (an init's ``TemplateRenderer``)."""

    def __init__(self, read: Callable[[TemplateFolder], T]) -> None:
        self._read = read

    def __call__(self) -> T:
        return self._read(active_folder())

    def of(self, folder: TemplateFolder) -> T:
        return self._read(folder)


def folder_value(read: Callable[[TemplateFolder], T]) -> FolderValue[T]:
    """Wrap ``read`` as a function of the active folder (see ``FolderValue``)."""
    return FolderValue(read)


def folder_cached(derive: Callable[[TemplateFolder], T]) -> FolderValue[T]:
    """Like ``folder_value``, but ``derive`` runs once per folder object and its result is kept
    on it (``TemplateFolder.derived``), never in a module: a folder read afresh derives afresh.

    For what is costly to build from a folder (its parsed questions, its Jinja environment).
    """
    return FolderValue(lambda folder: folder.derived(derive))


class ActiveFolderView:
    """The active folder, looked up each time something is read from it.

    It is the ``provisioner.backends.WordingFolder`` the registry reads a backend's nameable
    tools from: a backend whose list is fixed (memU's) reads nothing, so it needs no template
    folder, and Loom's list comes from whichever folder is active when it is read.
    """

    @property
    def loom_core_tools(self) -> frozenset[str]:
        """Loom's default tool list from the active folder's contract fixture (BACK-4)."""
        return active_folder().loom_core_tools


ACTIVE_FOLDER = ActiveFolderView()


loom_core_tools = folder_value(lambda folder: folder.loom_core_tools)
"""Loom's default ("core") tool list, read from the active folder's contract fixture (BACK-4).

Raises ``ContractFixtureError`` when the fixture is missing or has no ``core_tools`` list: the
list is never guessed.
"""
