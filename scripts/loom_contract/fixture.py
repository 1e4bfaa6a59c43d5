"""The fixture itself: Nerve's usage held against a checkout, the Loom wording, the JSON text.

For each op in ``NERVE_USAGE``, ``OPERATOR_USAGE`` and ``AGENT_USAGE``, ``describe_op`` finds
the default-list tool that serves it, and for each op in ``LOOM_OP_USAGE`` the ``loom_op`` tool
that reaches it by name; either way it checks every argument, fixed value and answer field
against the op's own schemas; ``wording_tools`` collects the ``loom_*`` tools the rendered
Loom wording names, all of which must be in that list (BACK-4). ``build_fixture`` puts the
entries together and ``fixture_text`` gives the stable bytes written to
``tests/fixtures/loom_lifecycle_ops.json``.
Any disagreement is a ``Refusal``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .checkout import (
    ANY_OP,
    CORE_LIST,
    OP_FILE_SUFFIX,
    OPS_DIR,
    TOOLSETS_FILE,
    Checkout,
    OpSchema,
    refuse,
)
from .schema import branches, covered, requirements, schemas_at, validation_error
from .usage import AGENT_USAGE, ANY, LOOM_OP_USAGE, NERVE_USAGE, OPERATOR_USAGE, OpUsage

GENERATOR = "scripts/loom_contract_fixture.py"  # the fixture names the command that wrote it
LOOM_WORDING_PREFIX = "loom/"  # golden-relative keys of the Loom renders
JSON_INDENT = 2


def serving_tool(op: str, checkout: Checkout) -> str:
    """The ``core`` tool that serves ``op`` on MCP; ``Refusal`` when Loom does not serve it so."""
    if op in checkout.off_mcp:
        raise refuse(TOOLSETS_FILE, f"off_mcp lists {op}, which Nerve calls", f"{op} served on MCP")
    serving = sorted(tool for tool, target in checkout.tools.items() if target == op)
    if not serving:
        raise refuse(
            TOOLSETS_FILE,
            f"no tool but {ANY_OP!r} serves {op}, which Nerve calls",
            f"a tool with op: {op}",
        )
    in_core = [tool for tool in serving if tool in checkout.core]
    if not in_core:
        raise refuse(
            TOOLSETS_FILE,
            f"{', '.join(serving)} serves {op}, but lists.{CORE_LIST} does not list it",
            f"the tool for {op} in the default list",
        )
    return in_core[0]


def loom_op_tool(op: str, checkout: Checkout) -> str:
    """The tool that calls any op by name (``loom_op``), for an op Nerve reaches through it.

    ``Refusal`` when Loom keeps ``op`` off MCP (refused even through ``loom_op``) or serves no
    such tool.
    """
    if op in checkout.off_mcp:
        raise refuse(
            TOOLSETS_FILE,
            f"off_mcp lists {op}, which Nerve calls through loom_op",
            f"{op} reachable through loom_op",
        )
    serving = sorted(tool for tool, target in checkout.tools.items() if target == ANY_OP)
    if not serving:
        raise refuse(
            TOOLSETS_FILE,
            f"no tool has op {ANY_OP!r}, but Nerve calls {op} through loom_op",
            f"a tool with op: {ANY_OP!r}",
        )
    return serving[0]


def describe_op(
    op: str, usage: OpUsage, checkout: Checkout, *, tool: str | None = None
) -> dict[str, Any]:
    """The fixture's entry for ``op``, after checking ``usage`` against its schemas.

    ``tool`` is the tool that reaches it; by default the ``core`` tool that serves it.
    """
    tool = tool or serving_tool(op, checkout)
    schema = checkout.ops.get(op)
    if schema is None:
        where = f"{OPS_DIR}/{op}{OP_FILE_SUFFIX}"
        raise refuse(where, f"no such file, but Nerve calls {op}", "the op's schema")
    for path, values in usage.arguments.items():
        check_argument(schema, path, values)
    required = requirements(schema.params, usage.arguments)
    unsent = sorted(path for path in required.when_sent if not covered(path, usage.arguments))
    if unsent:
        raise refuse(
            schema.where,
            f"params require {', '.join(unsent)}, which Nerve does not send",
            "required arguments to be ones Nerve sends",
        )
    result_values: dict[str, list[Any]] = {}
    for path in usage.reads:
        enum = result_enum(schema, path)
        if enum is not None:
            result_values[path] = enum
    return {
        "tool": tool,
        "arguments": sorted(usage.arguments),
        "required_arguments": sorted(required.always),
        "fixed_values": {
            path: list(values) for path, values in usage.arguments.items() if values is not ANY
        },
        "result_fields": sorted(usage.reads),
        "result_values": result_values,
        "params_schema": schema.params,
        "result_schema": schema.result,
    }


def check_argument(schema: OpSchema, path: str, values: tuple[Any, ...] | None) -> None:
    """``Refusal`` unless params declare ``path`` and allow each of its fixed ``values``."""
    declared = schemas_at(schema.params, path)
    if not declared:
        raise refuse(
            schema.where,
            f"params do not declare {path!r}, which Nerve sends",
            f"{path!r} among the op's arguments",
        )
    for value in values or ():
        errors = [validation_error(value, node, schema.params) for node in declared]
        if None not in errors:
            raise refuse(
                schema.where,
                f"params do not allow {json.dumps(value)} for {path!r} ({errors[0]})",
                "the values Nerve sends to be allowed",
            )


def result_enum(schema: OpSchema, path: str) -> list[Any] | None:
    """The sorted values the result allows at ``path`` when it lists them, else None.

    ``Refusal`` when the result schema does not declare ``path``.
    """
    declared = schemas_at(schema.result, path)
    if not declared:
        raise refuse(
            schema.where,
            f"result does not declare {path!r}, which Nerve reads",
            f"{path!r} among the op's answer fields",
        )
    values: list[Any] = []
    for node in declared:
        for branch in branches(node, schema.result):
            if not isinstance(branch.get("enum"), list):
                return None
            values.extend(value for value in branch["enum"] if value not in values)
    return sorted(values, key=json.dumps)


# --- The Loom wording ---------------------------------------------------------------------------


def wording_tools(texts: Mapping[str, str], core: Iterable[str]) -> list[str]:
    """The sorted ``loom_*`` tools that ``texts`` (name -> text) name, all in ``core`` (BACK-4).

    ``Refusal`` naming the first text (by name) that names a tool ``core`` does not list.
    """
    from provisioner.templating.wording import loom_tools_named

    allowed = set(core)
    named: set[str] = set()
    for name in sorted(texts):
        tools = loom_tools_named(texts[name])
        outside = sorted(tools - allowed)
        if outside:
            raise refuse(
                name,
                f"the Loom wording names {', '.join(outside)}, which "
                f"{TOOLSETS_FILE} lists.{CORE_LIST} does not list",
                f"only tools of the default list: {', '.join(sorted(allowed))}",
            )
        named |= tools
    return sorted(named)


def rendered_loom_wording() -> dict[str, str]:
    """Every Loom render (workspaces and runtime texts), keyed by golden-relative path.

    Renders through the package into a scratch folder that is removed afterwards. A render
    that fails is a ``Refusal``: without the wording, its tools cannot be checked.
    """
    try:
        from provisioner.golden.check import render_expected

        with tempfile.TemporaryDirectory(prefix="loom-contract-") as scratch:
            rendered = render_expected(Path(scratch))
    except Exception as error:
        raise refuse(
            "provisioner.golden.check.render_expected",
            f"failed ({type(error).__name__}: {error})",
            "the Loom wording to render",
        ) from None
    return {
        key: file.content.decode("utf-8", errors="replace")
        for key, file in rendered.items()
        if key.startswith(LOOM_WORDING_PREFIX)
    }


# --- The fixture --------------------------------------------------------------------------------


def build_fixture(checkout: Checkout, wording: Mapping[str, str]) -> dict[str, Any]:
    """The whole fixture as data; ``Refusal`` on any disagreement."""
    return {
        "generator": GENERATOR,
        "ops": {op: describe_op(op, usage, checkout) for op, usage in NERVE_USAGE.items()},
        "operator_ops": {
            op: describe_op(op, usage, checkout) for op, usage in OPERATOR_USAGE.items()
        },
        "loom_op_ops": {
            op: describe_op(op, usage, checkout, tool=loom_op_tool(op, checkout))
            for op, usage in LOOM_OP_USAGE.items()
        },
        "agent_ops": {op: describe_op(op, usage, checkout) for op, usage in AGENT_USAGE.items()},
        "core_tools": sorted(checkout.core),
        "wording_tools": wording_tools(wording, checkout.core),
    }


def fixture_text(fixture: Mapping[str, Any]) -> str:
    """Stable bytes: sorted keys, indent 2, a trailing newline."""
    return json.dumps(fixture, indent=JSON_INDENT, sort_keys=True) + "\n"
