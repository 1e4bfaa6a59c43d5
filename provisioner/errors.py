"""The base of every exception that means "bad input" to the command line.

Each subclass is raised with a message that names what is wrong, where, and what is expected;
the CLI prints it as one line and exits with status 2. Anything else is a bug and keeps its
traceback. Keeping the base here, in a module that imports nothing, lets the CLI catch every
such error without importing the modules that raise them.
"""

from __future__ import annotations


class UserError(Exception):
    """Input the package cannot work with; ``str()`` is one line for the user."""


class TemplateBroken(Exception):
    """A template that cannot be rendered; ``str()`` names the file and line.

    Not a ``UserError``: the command line's input was fine, the package's (or a template
    author's) template is not. The CLI prints it as one line and exits with status 3
    (``EXIT_TEMPLATE``), so CI tells a broken template from a wording change (GOLD-2).
    """
