"""One root: every exception the package defines derives from ``ProvisionerError``, in the
group that says what its caller does, and no two share a name.

The package is imported module by module (the test extras bring every optional library), and
each exception class is judged where it is defined.
"""

from __future__ import annotations

from collections import Counter

import pytest

from provisioner.base.errors import TemplateBroken, UserError
from provisioner.runtime.errors import (
    MemoryUnavailable,
    OperatorMustAct,
    ProvisionerError,
    ProvisionerRuntimeError,
    StoreFault,
)
from tests.support.exceptions import defined_exceptions

GROUPS = (UserError, TemplateBroken, MemoryUnavailable, StoreFault, OperatorMustAct)


EXCEPTIONS = defined_exceptions()


def test_the_package_defines_exceptions_to_judge() -> None:
    assert len(EXCEPTIONS) > 40
    assert ProvisionerError in EXCEPTIONS


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: f"{e.__module__}.{e.__qualname__}")
def test_every_exception_derives_from_the_root(error: type[BaseException]) -> None:
    assert issubclass(error, ProvisionerError)


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: f"{e.__module__}.{e.__qualname__}")
def test_every_exception_is_in_a_group_below_the_root(error: type[BaseException]) -> None:
    """Only the root and the runtime's root stand outside the groups a caller branches on."""
    if error in (ProvisionerError, ProvisionerRuntimeError):
        return
    assert issubclass(error, GROUPS), f"{error.__qualname__} is in no group"


def test_no_two_exceptions_share_a_name() -> None:
    twice = [name for name, count in Counter(e.__name__ for e in EXCEPTIONS).items() if count > 1]
    assert twice == []


@pytest.mark.parametrize(
    ("error", "status"),
    [(UserError, 2), (TemplateBroken, 3), (MemoryUnavailable, 75), (StoreFault, 75)],
)
def test_each_group_carries_the_status_a_command_exits_with(
    error: type[ProvisionerError], status: int
) -> None:
    assert error("x").exit_status == status
