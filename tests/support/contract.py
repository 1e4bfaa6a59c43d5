"""CON-2: every call a test's gateway saw, held to the Loom contract fixture.

Each argument a call sends must be one the fixture declares for its tool, and each fixed value
one of the values the fixture lists; the helpers return what breaks that, empty when all is
well, so a fixture can assert it when its test ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from provisioner.devgateway import SeenCall
from tests.support.repo import CONTRACT_FIXTURE


def contract_problems(calls: Any) -> list[str]:
    """What each ``SeenCall`` sent that the fixture does not declare (empty when all is well)."""
    by_tool = {entry["tool"]: entry for entry in CONTRACT_FIXTURE["ops"].values()}
    problems = []
    for call in calls:
        problems += call_problems(call, by_tool)
    return problems


def call_problems(call: SeenCall, by_tool: dict[str, Any]) -> list[str]:
    entry = by_tool.get(call.tool)
    if entry is None:
        return [f"{call.tool}: not a lifecycle tool the fixture declares"]
    problems = []
    declared = set(entry["arguments"])
    fixed = entry["fixed_values"]
    for path, value in argument_paths(call.arguments):
        if path not in declared and not any(d.startswith(path + "[]") for d in declared):
            problems.append(f"{call.tool}: argument {path!r} is not declared")
        if path in fixed and value not in fixed[path]:
            problems.append(f"{call.tool}: {path} = {value!r} is not in {fixed[path]!r}")
    return problems


def argument_paths(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Each (path, value) of the arguments: objects by ``.``, list items by ``[]``.

    A list of objects yields its items' fields (``messages[].role``); a list of plain values
    is one value at its own path (``sections`` = ``["memories"]``).
    """
    if isinstance(value, dict):
        for key, item in value.items():
            yield from argument_paths(item, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for item in value:
            yield from argument_paths(item, f"{prefix}[]")
    else:
        yield prefix, value


def write_contract_problems(calls: Any) -> list[str]:
    """What each call sent that the fixture's ``operator_ops`` do not declare: the migration
    writes through ``memory.set`` only."""
    entry = CONTRACT_FIXTURE["operator_ops"]["memory.set"]
    problems = []
    for call in calls:
        assert isinstance(call, SeenCall)
        if call.tool != entry["tool"]:
            problems.append(f"{call.tool}: the migration calls only {entry['tool']}")
            continue
        undeclared = set(call.arguments) - set(entry["arguments"])
        if undeclared:
            problems.append(f"{call.tool}: {sorted(undeclared)} not declared")
    return problems
