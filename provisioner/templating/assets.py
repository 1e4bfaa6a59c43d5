"""Where the package's templates, skills and the Loom contract fixture are on disk.

An installed wheel carries them under ``provisioner/_assets/`` (see pyproject's
``force-include``); a source checkout (editable install, or tests run from the tree) has them
at the repository root. The answer comes from the active ``TemplateFolder``
(``provisioner.templating.folder``), so both layouts behave the same and ``$NERVE_ASSETS_DIR``
names another folder to render from.
"""

from __future__ import annotations

from pathlib import Path

from provisioner.templating.folder import (
    ASSETS_ENV,
    CHECKOUT_ROOT,
    AssetsMissing,
    active_folder,
    folder_value,
)

__all__ = [
    "ASSETS_ENV",
    "AssetsMissing",
    "asset_root",
    "checkout_root",
    "loom_fixture_path",
    "skills_dir",
    "template_dir",
]

asset_root = folder_value(lambda folder: folder.root)
"""The folder that holds ``templates/`` and ``skills/``; raises ``AssetsMissing`` if none."""


def template_dir() -> Path:
    """The Copier template (the folder holding ``copier.yml``)."""
    return active_folder().template_dir


def skills_dir() -> Path:
    """The bundled skills, templated per backend (TXT-2)."""
    return active_folder().skills_dir


def loom_fixture_path() -> Path:
    """The Loom contract fixture (BACK-4, CON-1)."""
    return active_folder().loom_fixture_path


def checkout_root() -> Path:
    """The source checkout this package was imported from (it may not be one: see golden)."""
    return CHECKOUT_ROOT
