"""The exceptions that mean "bad input" to the command line (exit status 2, one line).

Each is raised with a message that names what is wrong, where, and what is expected; the CLI
prints it as it is. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


def user_errors() -> tuple[type[BaseException], ...]:
    """The exception classes the CLI reports as one line with exit status 2."""
    from provisioner.assets import AssetsMissing
    from provisioner.backends import ContractFixtureError, UnknownBackend
    from provisioner.cli import UsageError
    from provisioner.config import ConfigError
    from provisioner.golden import GoldenRefused
    from provisioner.init import InitError
    from provisioner.local_config import LocalConfigError
    from provisioner.previews import PreviewError
    from provisioner.questions import AnswerError

    return (
        UsageError,
        AssetsMissing,
        ConfigError,
        InitError,
        AnswerError,
        UnknownBackend,
        ContractFixtureError,
        GoldenRefused,
        LocalConfigError,
        PreviewError,
    )
