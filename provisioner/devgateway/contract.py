"""The Loom contract as the dev gateway serves it: tools, their ops, and argument checks.

Everything comes from the generated contract fixture (``loom_lifecycle_ops.json``, CON-1): the
tool that serves each op, and Loom's own params schema for it. A call whose arguments break
that schema is refused as -32602, as Loom's MCP server refuses it, so a test against the dev
gateway fails the moment Nerve sends something Loom would not take.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from provisioner.templating.assets import loom_fixture_path

SERVED_SECTIONS = ("ops", "operator_ops", "agent_ops")  # the fixture's sections of served tools


@dataclass(frozen=True)
class ServedTool:
    """One Loom tool the stand-in serves: its name, the op behind it, and the op's schemas."""

    name: str
    op: str
    params_schema: dict[str, Any]
    result_schema: dict[str, Any]

    def argument_error(self, arguments: Any) -> str | None:
        """Why ``arguments`` break the params schema (one line), or None when they fit."""
        validator = jsonschema.Draft202012Validator(self.params_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path) or "arguments"
        return f"{where}: {error.message}"[:300]


@cache
def served_tools(fixture: Path | None = None) -> dict[str, ServedTool]:
    """Every tool of the fixture (lifecycle ops, operator jobs' ops and the agent's ops), keyed
    by tool name. An op served through ``loom_op`` only is not served here."""
    document = json.loads((fixture or loom_fixture_path()).read_text(encoding="utf-8"))
    tools: dict[str, ServedTool] = {}
    for section in SERVED_SECTIONS:
        for op, entry in document[section].items():
            tools[entry["tool"]] = ServedTool(
                name=entry["tool"],
                op=op,
                params_schema=entry["params_schema"],
                result_schema=entry["result_schema"],
            )
    return tools
