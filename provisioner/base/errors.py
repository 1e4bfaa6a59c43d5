"""The errors of the provisioning side's input and templates, under the package's one root.

``UserError`` is input the package cannot work with (a flag, a file, an answer, an inventory):
one line naming what, where and what is expected, exit 2. ``TemplateBroken`` is a template that
cannot be rendered: one line naming the file and line, exit 3, so CI tells a broken template
from a wording change (GOLD-2). Both derive from ``ProvisionerError``, the root every error of
the package derives from, drawn with the whole tree in ``provisioner.runtime.errors``: the
runtime stands alone on the ground floor, so the root lives there.
"""

from __future__ import annotations

from provisioner.runtime.face import EXIT_USAGE, ProvisionerError

EXIT_TEMPLATE = 3  # GOLD-2: a template that cannot be rendered, told apart from a difference


class UserError(ProvisionerError):
    """Input the package cannot work with; ``str()`` is one line for the user (exit 2)."""

    exit_status = EXIT_USAGE


class TemplateBroken(ProvisionerError):
    """A template that cannot be rendered; ``str()`` names the file and line (exit 3).

    Not a ``UserError``: the command line's input was fine, the package's (or a template
    author's) template is not (GOLD-2).
    """

    exit_status = EXIT_TEMPLATE
