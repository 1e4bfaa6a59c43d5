"""Where the package's templates, skills and the Loom contract fixture are on disk.

An installed wheel carries them under ``provisioner/_assets/`` (see pyproject's
``force-include``); a source checkout (editable install, or tests run from the tree) has them
at the repository root. Everything that reads a template asks this module, so both layouts
behave the same.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from provisioner.errors import UserError

_PACKAGE_DIR = Path(__file__).resolve().parent
_WHEEL_ASSETS = _PACKAGE_DIR / "_assets"
_CHECKOUT_ROOT = _PACKAGE_DIR.parent
ASSETS_ENV = "NERVE_ASSETS_DIR"  # a folder with templates/ and skills/ to render from instead


class AssetsMissing(UserError, RuntimeError):
    """The templates are neither in the installed package nor in a source checkout."""


@cache
def asset_root() -> Path:
    """The folder that holds ``templates/`` and ``skills/``.

    ``$NERVE_ASSETS_DIR`` names another such folder (a template author's working copy, or a
    test's modified copy). Raises ``AssetsMissing`` when no candidate has the templates.
    """
    override = os.environ.get(ASSETS_ENV)
    if override:
        root = Path(override).expanduser().resolve()
        if (root / "templates" / "copier.yml").is_file():
            return root
        raise AssetsMissing(f"{ASSETS_ENV}={override}: no templates/copier.yml there")
    for root in (_WHEEL_ASSETS, _CHECKOUT_ROOT):
        if (root / "templates" / "copier.yml").is_file():
            return root
    raise AssetsMissing(
        f"templates not found under {_WHEEL_ASSETS} or {_CHECKOUT_ROOT}; "
        "expected an intact install of nerve-provisioner"
    )


def template_dir() -> Path:
    """The Copier template (the folder holding ``copier.yml``)."""
    return asset_root() / "templates"


def skills_dir() -> Path:
    """The bundled skills, templated per backend (TXT-2)."""
    return asset_root() / "skills"


def loom_fixture_path() -> Path:
    """The Loom contract fixture (BACK-4, CON-1).

    In a wheel it is shipped beside the templates; in a checkout it is the generated file under
    ``tests/fixtures/``.
    """
    shipped = _WHEEL_ASSETS / "loom_lifecycle_ops.json"
    if shipped.is_file():
        return shipped
    return _CHECKOUT_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json"


def checkout_root() -> Path:
    """The source checkout this package was imported from (goldens live there)."""
    return _CHECKOUT_ROOT
