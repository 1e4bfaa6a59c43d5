"""The Loom contract as the dev gateway serves it: tools, their ops, and argument checks.

Everything comes from the generated contract fixture (``loom_lifecycle_ops.json``, CON-1): the
tool that serves each op, and Loom's own params schema for it. A call whose arguments break
that schema is refused as -32602, as Loom's MCP server refuses it, so a test against the dev
gateway fails the moment Nerve sends something Loom would not take.

``loom_op`` calls an op by name: ``{"op": <name>, "params": <the op's arguments>}``. It serves
the ops the fixture reaches through it (``loom_op_ops``: the follow-up of queued batches,
SWEEP-15) and every op a tool of the stand-in serves; ``params`` are held to that op's schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from provisioner.templating.folder import active_folder

SERVED_SECTIONS = ("ops", "operator_ops", "agent_ops")  # the fixture's sections of served tools
LOOM_OP_SECTION = "loom_op_ops"  # the ops reached only through loom_op
LOOM_OP = "loom_op"  # loom-ops.md: the tool that calls any op by name
LOOM_OP_NAME = "op"  # how loom_op's arguments name the op
LOOM_OP_PARAMS = "params"  # and carry its arguments
LOOM_OP_SCHEMA: dict[str, Any] = {  # loom_op's own arguments, as the stand-in checks them
    "type": "object",
    "additionalProperties": False,
    "required": [LOOM_OP_NAME, LOOM_OP_PARAMS],
    "properties": {
        LOOM_OP_NAME: {"type": "string", "minLength": 1, "maxLength": 128},
        LOOM_OP_PARAMS: {"type": "object"},
    },
}


@dataclass(frozen=True)
class ServedTool:
    """One Loom tool the stand-in serves: its name, the op behind it, and the op's schemas."""

    name: str
    op: str
    params_schema: dict[str, Any]
    result_schema: dict[str, Any]

    def argument_error(self, arguments: Any) -> str | None:
        """Why ``arguments`` break the params schema (one line), or None when they fit."""
        return _schema_error(self.params_schema, arguments)

    def resolve(self, arguments: Any) -> tuple[str, Mapping[str, Any]]:
        """The op to answer and its arguments; ``ValueError`` (one line) when they break the
        op's params schema."""
        problem = self.argument_error(arguments)
        if problem is not None:
            raise ValueError(problem)
        return self.op, arguments


@dataclass(frozen=True)
class LoomOpTool:
    """``loom_op``: any op of ``ops`` by name, its ``params`` held to that op's schema."""

    name: str
    ops: Mapping[str, ServedTool]
    params_schema: dict[str, Any]

    def resolve(self, arguments: Any) -> tuple[str, Mapping[str, Any]]:
        """The op named and its params; ``ValueError`` (one line) for arguments that are not
        ``{"op", "params"}``, an op not served here, or params its schema refuses."""
        problem = _schema_error(self.params_schema, arguments)
        if problem is not None:
            raise ValueError(problem)
        op = arguments[LOOM_OP_NAME]
        served = self.ops.get(op)
        if served is None:
            raise ValueError(f"{LOOM_OP_NAME}: {op[:128]!r} is not an op served through loom_op")
        problem = served.argument_error(arguments[LOOM_OP_PARAMS])
        if problem is not None:
            raise ValueError(f"{LOOM_OP_PARAMS}/{problem}"[:300])
        return op, arguments[LOOM_OP_PARAMS]


def _schema_error(schema: dict[str, Any], value: Any) -> str | None:
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"[:300]


@cache
def served_tools(fixture: Path | None = None) -> dict[str, ServedTool | LoomOpTool]:
    """Every tool of the fixture (lifecycle ops, operator jobs' ops and the agent's ops), keyed
    by tool name, and ``loom_op`` for those ops and the ones reached only through it."""
    path = fixture or active_folder().loom_fixture_path
    document = json.loads(path.read_text(encoding="utf-8"))
    tools: dict[str, ServedTool | LoomOpTool] = {}
    by_op: dict[str, ServedTool] = {}
    for section in (*SERVED_SECTIONS, LOOM_OP_SECTION):
        for op, entry in document.get(section, {}).items():
            served = ServedTool(
                name=entry["tool"],
                op=op,
                params_schema=entry["params_schema"],
                result_schema=entry["result_schema"],
            )
            by_op.setdefault(op, served)
            if section != LOOM_OP_SECTION:
                tools[served.name] = served
    tools[LOOM_OP] = LoomOpTool(name=LOOM_OP, ops=by_op, params_schema=LOOM_OP_SCHEMA)
    return tools


MEMORY_SET_TOOL = "loom_memory_set"  # MIG-1: the operator jobs' keyed write
# REL-8: what loom_memory_set took before Loom carried a memory's kind, tags and dates over.
FIELDS_AN_OLDER_MEMORY_SET_LACKS = ("kind", "tags", "created_at", "updated_at", "happened_at")


def with_an_older_memory_set(
    tools: Mapping[str, ServedTool | LoomOpTool],
) -> dict[str, ServedTool | LoomOpTool]:
    """``tools`` with ``loom_memory_set`` as an older Loom serves it: its schema, in
    ``tools/list`` and in the check of every call, lacks ``kind``, ``tags`` and the dates, so a
    write that sends one is refused -32602 as that Loom refuses it (REL-8)."""
    current = tools[MEMORY_SET_TOOL]
    assert isinstance(current, ServedTool)
    schema = dict(current.params_schema)
    schema["properties"] = {
        name: value
        for name, value in schema["properties"].items()
        if name not in FIELDS_AN_OLDER_MEMORY_SET_LACKS
    }
    older = ServedTool(current.name, current.op, schema, current.result_schema)
    return {**tools, MEMORY_SET_TOOL: older}
