"""The outcome hierarchy (GW-5): one tree, every class in it, all under GatewayError."""

from __future__ import annotations

import re

import pytest

from provisioner import runtime
from provisioner.runtime.gateway import errors
from provisioner.runtime.memory_contract import MemoryBackendUnavailable


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
    def test_every_outcome_is_a_gateway_error_exported_by_the_runtime(self, cls: type) -> None:
        assert issubclass(cls, errors.GatewayError)
        assert getattr(runtime, cls.__name__) is cls

    def test_messages_are_one_bounded_line(self) -> None:
        error = errors.PolicyRefused("line one\nline two\x1b[31m" + "x" * 1000)
        assert "\n" not in error.message and "\x1b" not in error.message
        assert len(error.message) <= errors.MESSAGE_MAX_CHARS

    def test_the_memory_contract_error_is_not_a_gateway_error(self) -> None:
        """GW-1: the backend translates gateway failures; the two hierarchies stay apart."""
        error = MemoryBackendUnavailable("memory is unavailable", backend="loom")
        assert not isinstance(error, errors.GatewayError)
        assert error.backend == "loom"
