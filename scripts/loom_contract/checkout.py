"""Reading a Loom checkout: its op schemas and its MCP toolsets, in the documented layout.

A checkout holds one JSON file per op under ``sdk/ops/`` (the op's params and result schemas)
and ``mcp/toolsets.yaml`` (the tools and the op each serves, the named tool lists, the ops kept
off MCP). ``load_checkout`` reads both into a ``Checkout``. Anything not laid out that way is a
``Refusal``, the generator's one way to fail, which the rest of the generator raises as well:
one line saying what, where and what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .schema import Schema

OPS_DIR = "sdk/ops"  # <checkout>/sdk/ops/<op name>.json
OP_FILE_SUFFIX = ".json"
TOOLSETS_FILE = "mcp/toolsets.yaml"
CORE_LIST = "core"  # BACK-4: Loom's default tool list
ANY_OP = "*"  # the op of a tool that calls any op by name (loom_op)


class Refusal(Exception):
    """The contract cannot be generated; the message is the one line printed before exit 2."""


def refuse(where: str, what: str, expected: str) -> Refusal:
    """A ``Refusal`` reading ``<where>: <what>; expected <expected>``, on a single line."""
    line = f"{where}: {what}; expected {expected}"
    return Refusal(" ".join(line.split()))


@dataclass(frozen=True)
class OpSchema:
    """One op of the generated SDK: the schema of its arguments and of its answer."""

    name: str
    params: Schema
    result: Schema

    @property
    def where(self) -> str:
        return f"{OPS_DIR}/{self.name}{OP_FILE_SUFFIX}"


@dataclass(frozen=True)
class Checkout:
    """What the generator reads from a Loom checkout."""

    ops: Mapping[str, OpSchema]
    tools: Mapping[str, str]  # tool name -> op name (ANY_OP for a tool that calls any op)
    core: tuple[str, ...]
    off_mcp: frozenset[str]


def load_checkout(root: Path) -> Checkout:
    """Read ``root`` in the documented layout; ``Refusal`` when it is not laid out that way."""
    if not root.is_dir():
        raise refuse(str(root), "no such folder", "a Loom checkout")
    ops = load_ops(root)
    tools, core, off_mcp = load_toolsets(root)
    return Checkout(ops=ops, tools=tools, core=core, off_mcp=off_mcp)


def load_ops(root: Path) -> dict[str, OpSchema]:
    """Every ``sdk/ops/<op>.json``; each must name its own op and hold two object schemas."""
    folder = root / OPS_DIR
    if not folder.is_dir():
        raise refuse(f"{root}/{OPS_DIR}", "no such folder", "one <op name>.json per op")
    ops: dict[str, OpSchema] = {}
    for path in sorted(folder.glob(f"*{OP_FILE_SUFFIX}")):
        name = path.name.removesuffix(OP_FILE_SUFFIX)
        where = f"{OPS_DIR}/{path.name}"
        document = _read(path, where, json.loads)
        if not isinstance(document, dict) or document.get("op") != name:
            raise refuse(where, "does not name its op", f'{{"op": "{name}", "params", "result"}}')
        for part in ("params", "result"):
            if not isinstance(document.get(part), dict):
                raise refuse(where, f"{part} is not a JSON Schema object", "an object schema")
        ops[name] = OpSchema(name, document["params"], document["result"])
    if not ops:
        raise refuse(f"{root}/{OPS_DIR}", "holds no op files", "one <op name>.json per op")
    return ops


def load_toolsets(root: Path) -> tuple[dict[str, str], tuple[str, ...], frozenset[str]]:
    """``tools`` (tool -> op), the ``core`` list and ``off_mcp`` from ``mcp/toolsets.yaml``."""
    path = root / TOOLSETS_FILE
    if not path.is_file():
        raise refuse(f"{root}/{TOOLSETS_FILE}", "no such file", "the MCP toolsets")
    document = _read(path, TOOLSETS_FILE, yaml.safe_load)
    if not isinstance(document, dict):
        raise refuse(TOOLSETS_FILE, "is not a mapping", "keys tools, lists, off_mcp")
    tools = _tool_ops(document.get("tools"))
    lists = document.get("lists")
    core = lists.get(CORE_LIST) if isinstance(lists, dict) else None
    if not _is_names(core):
        raise refuse(
            TOOLSETS_FILE,
            f"lists.{CORE_LIST} is missing or not a list of names",
            "the default tool list",
        )
    for tool in core:
        if tool not in tools:
            raise refuse(
                TOOLSETS_FILE,
                f"lists.{CORE_LIST} lists {tool}, which tools does not",
                "every listed tool declared under tools",
            )
    off_mcp = document.get("off_mcp", [])
    if not _is_names(off_mcp):
        raise refuse(TOOLSETS_FILE, "off_mcp is not a list of op names", "a list of op names")
    return tools, tuple(core), frozenset(off_mcp)


def _tool_ops(tools: Any) -> dict[str, str]:
    if not isinstance(tools, dict) or not tools:
        raise refuse(TOOLSETS_FILE, "tools is missing or empty", "tools: {<tool>: {op: <op>}}")
    found: dict[str, str] = {}
    for tool, entry in tools.items():
        op = entry.get("op") if isinstance(entry, dict) else None
        if not isinstance(tool, str) or not isinstance(op, str):
            raise refuse(TOOLSETS_FILE, f"tools.{tool} has no op name", "{op: <op name>}")
        found[tool] = op
    return found


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _read(path: Path, where: str, parse: Callable[[str], Any]) -> Any:
    """``path`` parsed; a file that cannot be read or parsed is a ``Refusal`` naming ``where``."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise refuse(
            where, f"cannot be read ({type(error).__name__}: {first_line})", "valid JSON or YAML"
        ) from None
