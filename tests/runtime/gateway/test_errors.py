"""The outcome hierarchy (GW-5): one tree, every class in it, all under GatewayError; and every
error the runtime raises under one root, through a group named for what the caller does."""

from __future__ import annotations

import re
import sqlite3

import pytest

from provisioner.runtime import errors as runtime_errors
from provisioner.runtime.errors import (
    ERROR_GROUPS,
    MemoryBackendUnavailable,
    MemoryUnavailable,
    OperatorMustAct,
    ProvisionerError,
    ProvisionerRuntimeError,
    StoreFault,
)
from provisioner.runtime.gateway import errors
from tests.support.exceptions import defined_exceptions


class TestOutcomeHierarchy:
    def test_the_module_docstring_draws_every_outcome_class(self) -> None:
        drawn = set(re.findall(r"[├└]── (\w+)", errors.__doc__ or ""))
        concrete = {cls.__name__ for cls in errors.OUTCOME_ERRORS}
        assert drawn == concrete | {"ServerFault"}

    def test_the_module_docstring_draws_every_group(self) -> None:
        drawn = set(re.findall(r"[├└]── \[(\w+)\]", errors.__doc__ or ""))
        assert drawn == {cls.__name__ for cls in errors.OUTCOME_GROUPS}

    @pytest.mark.parametrize(
        ("cls", "groups"),
        [
            (errors.MayPass, {"NotNow"}),
            (errors.CodedFault, {"NotNow"}),
            (errors.CircuitOpen, {"NotNow"}),
            (errors.ClientClosed, {"NotNow"}),
            (errors.GatewayCallTimeout, {"NotNow", "RequestTooBig"}),
            (errors.BodyTooLarge, {"RequestTooBig"}),
            (errors.NoAnswer, {"CountsForBreaker"}),
            (errors.GatewayUnreachable, {"CountsForBreaker"}),
            (errors.BrokenAnswer, {"ContractBroken"}),
            (errors.InternalFault, set()),
            (errors.PolicyRefused, set()),
            (errors.ToolRefused, set()),
            (errors.CatalogError, set()),
        ],
        ids=lambda value: getattr(value, "__name__", ""),
    )
    def test_each_outcome_sits_in_the_groups_a_caller_branches_on(
        self, cls: type, groups: set[str]
    ) -> None:
        in_groups = {group.__name__ for group in errors.OUTCOME_GROUPS if issubclass(cls, group)}
        assert in_groups == groups

    def test_an_uncoded_fault_is_the_only_server_fault_that_is_not_not_now(self) -> None:
        assert issubclass(errors.InternalFault, errors.ServerFault)
        assert not issubclass(errors.InternalFault, errors.NotNow)
        assert errors.CodedFault("busy", code="GRANT_BUSY").code == "GRANT_BUSY"
        assert errors.InternalFault("boom").code is None

    @pytest.mark.parametrize("cls", errors.OUTCOME_ERRORS, ids=lambda cls: cls.__name__)
    def test_every_outcome_is_a_gateway_error_and_so_memory_unavailable(self, cls: type) -> None:
        """A host catches the runtime's groups (docs/host-api.md); the outcome classes are the
        gateway client's own, each a ``MemoryUnavailable`` through ``GatewayError``."""
        assert issubclass(cls, errors.GatewayError)
        assert issubclass(cls, MemoryUnavailable)

    def test_messages_are_one_bounded_line(self) -> None:
        error = errors.PolicyRefused("line one\nline two\x1b[31m" + "x" * 1000)
        assert "\n" not in error.message and "\x1b" not in error.message
        assert len(error.message) <= errors.MESSAGE_MAX_CHARS

    def test_the_memory_contract_error_is_not_a_gateway_error(self) -> None:
        """GW-1: the backend translates gateway failures; the two hierarchies stay apart."""
        error = MemoryBackendUnavailable("memory is unavailable", backend="loom")
        assert not isinstance(error, errors.GatewayError)
        assert error.backend == "loom"


# The gateway client's own readers raise these and turn each into a ``GatewayError`` (a broken
# answer, an unreadable catalog) before the call returns: no caller ever sees them.
TRANSLATED_INSIDE_THE_GATEWAY_CLIENT = {"BodyOverLimit", "NotJson"}


DEFINED = {
    f"{cls.__module__}.{cls.__name__}": cls
    for cls in defined_exceptions("provisioner.runtime", "provisioner.integrations")
}
BY_NAME = {cls.__name__: cls for cls in DEFINED.values()}
RAISED = {
    path: cls
    for path, cls in DEFINED.items()
    if cls.__name__ not in TRANSLATED_INSIDE_THE_GATEWAY_CLIENT
    and cls is not ProvisionerRuntimeError
    and cls is not ProvisionerError  # the package's root, which the runtime holds for every room
}


class TestOneRoot:
    def test_the_walk_finds_the_errors_of_every_room_each_under_one_name(self) -> None:
        names = set(BY_NAME)
        assert len(names) == len(DEFINED)
        assert {"GatewayError", "StateBusyError", "SourceFailed", "FileFault"} <= names
        assert {"BackfillBusy", "UndeclaredField", "NerveDatabaseError"} <= names
        assert names >= TRANSLATED_INSIDE_THE_GATEWAY_CLIENT

    @pytest.mark.parametrize("path", sorted(RAISED))
    def test_every_runtime_error_is_under_the_root_through_a_group(self, path: str) -> None:
        cls = RAISED[path]
        assert issubclass(cls, ProvisionerRuntimeError)
        if cls not in ERROR_GROUPS:
            assert any(issubclass(cls, group) for group in ERROR_GROUPS), path

    def test_the_errors_module_draws_every_error_outside_the_gateway_tree(self) -> None:
        drawn = set(re.findall(r"\b[A-Z]\w+\b", runtime_errors.__doc__ or ""))
        outside_gateway = {
            cls.__name__ for cls in RAISED.values() if not issubclass(cls, errors.GatewayError)
        }
        assert outside_gateway <= drawn

    @pytest.mark.parametrize(
        ("name", "group", "builtin"),
        [
            ("MemoryBackendUnavailable", MemoryUnavailable, RuntimeError),
            ("GatewayError", MemoryUnavailable, Exception),
            ("KeptConnectionClosed", MemoryUnavailable, Exception),
            ("FileFault", StoreFault, Exception),
            ("StateBusyError", StoreFault, RuntimeError),
            ("BackfillBusy", StoreFault, RuntimeError),
            ("SourceFailed", StoreFault, Exception),
            ("StateVersionError", OperatorMustAct, RuntimeError),
            ("TranscriptsVersionError", OperatorMustAct, sqlite3.DatabaseError),
            ("StateUnreadable", OperatorMustAct, ValueError),
            ("UndeclaredField", OperatorMustAct, LookupError),
            ("NerveDatabaseError", OperatorMustAct, ValueError),
            ("ContractBroken", OperatorMustAct, Exception),
            ("PolicyRefused", OperatorMustAct, Exception),
        ],
        ids=lambda value: value if isinstance(value, str) else "",
    )
    def test_each_error_sits_in_the_group_of_what_its_caller_does_and_keeps_its_builtin_base(
        self, name: str, group: type, builtin: type
    ) -> None:
        cls = BY_NAME[name]
        assert issubclass(cls, group)
        assert issubclass(cls, builtin)

    def test_a_gateway_failure_that_needs_a_person_is_in_both_groups(self) -> None:
        """A contract broken or a policy refusal: memory is unavailable now, and nothing changes
        until someone acts; every other outcome only degrades."""
        both = {
            cls.__name__
            for cls in errors.OUTCOME_ERRORS
            if issubclass(cls, OperatorMustAct) and issubclass(cls, MemoryUnavailable)
        }
        assert both == {"BrokenAnswer", "PolicyRefused"}
        assert not any(issubclass(cls, StoreFault) for cls in errors.OUTCOME_ERRORS)
