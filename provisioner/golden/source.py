"""Which templates ``nerve golden check|update`` render (OPS-1).

Goldens freeze a checkout's templates, so both commands render the templates and skills of
the checkout whose goldens they work on, whatever is installed: after a plain ``pip install
.`` the package carries its own copy of the templates, frozen at install time, and rendering
that copy would pass a template edit silently and make ``update`` write nothing.

The folder is, in this order: the one ``$NERVE_ASSETS_DIR`` names (a working copy of the
templates, on purpose); the checkout the golden folder belongs to (``<checkout>/golden``); the
checkout the current folder is in; else the installed package's copy (a golden folder outside
any checkout, named with ``--golden-dir``). The output names the folder, so an author always
sees which templates were compared.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from provisioner.golden.check import is_checkout
from provisioner.templating.folder import (
    ASSETS_ENV,
    COPIER_FILE,
    AssetsMissing,
    active_folder,
    rendering_from,
)

FROM_ENVIRONMENT = ASSETS_ENV  # the origin names the variable, as the user set it
FROM_CHECKOUT = "checkout"
FROM_INSTALL = "installed package"


@dataclass(frozen=True)
class TemplateSource:
    """The folder holding the ``templates/`` and ``skills/`` a golden run renders."""

    root: Path
    origin: str  # FROM_ENVIRONMENT, FROM_CHECKOUT or FROM_INSTALL

    def describe(self) -> str:
        """``<folder> (<origin>)``, as the output names it."""
        return f"{self.root} ({self.origin})"

    @contextmanager
    def active(self) -> Iterator[None]:
        """Render from this folder inside the block.

        Raises ``AssetsMissing`` (one line, exit 2) when the folder lacks ``templates/`` or
        ``skills/``.
        """
        with rendering_from(self.root):
            yield


def template_source(
    golden_dir: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> TemplateSource:
    """The templates to render for the goldens in ``golden_dir`` (see the module's order).

    ``env`` and ``cwd`` default to the process's own. Raises ``AssetsMissing`` when
    ``$NERVE_ASSETS_DIR`` names a folder without templates, or, with neither variable nor
    checkout, when the installed package has none.
    """
    env = os.environ if env is None else env
    if env.get(ASSETS_ENV):
        root = Path(env[ASSETS_ENV]).expanduser().resolve()
        return TemplateSource(_checked_override(root, env[ASSETS_ENV]), FROM_ENVIRONMENT)
    checkout = checkout_of(golden_dir) or checkout_around((cwd or Path.cwd()).resolve())
    if checkout is not None:
        return TemplateSource(checkout, FROM_CHECKOUT)
    return TemplateSource(active_folder().root, FROM_INSTALL)


def checkout_of(golden_dir: Path) -> Path | None:
    """The checkout whose ``golden/`` folder ``golden_dir`` is, if it is one."""
    folder = golden_dir.resolve()
    if folder.name == "golden" and is_checkout(folder.parent):
        return folder.parent
    return None


def checkout_around(folder: Path) -> Path | None:
    """The checkout ``folder`` is in (it or a folder above it), if any."""
    return next((root for root in (folder, *folder.parents) if is_checkout(root)), None)


def _checked_override(root: Path, given: str) -> Path:
    """``root`` when it holds a Copier template; else ``AssetsMissing`` naming the variable."""
    if not (root / "templates" / COPIER_FILE).is_file():
        raise AssetsMissing(f"{ASSETS_ENV}={given}: no templates/{COPIER_FILE} there")
    return root
