"""Generate the Loom contract fixture from a Loom checkout (CON-1, BACK-4).

Nerve reaches Loom only through the ops, arguments and answer fields declared in
``NERVE_USAGE`` (and, for what the Loom wording tells the agent to send, ``AGENT_USAGE``)
below. This script holds that declaration up against a Loom checkout — its generated SDK's op
schemas (``sdk/ops/<op>.json``) and its MCP toolsets (``mcp/toolsets.yaml``), the layout of
``contracts/loom-ops.md`` — and writes what it found to ``tests/fixtures/loom_lifecycle_ops.json``:
per op, the MCP tool that serves it, the arguments Nerve sends with their fixed values, the
answer fields Nerve reads, and the op's own params and result schemas (the dev gateway validates
every call against them); plus Loom's default (``core``) tool list and the ``loom_*`` tools the
rendered Loom wording names. The runtime's contract tests (CON-2) and the wording lint (BACK-4,
GOLD-5) read that file; nobody types it by hand.

When the checkout and Nerve disagree (an op Loom keeps off MCP or serves only through
``loom_op``, an argument or field its schema does not declare, a fixed value it does not allow,
wording naming a tool outside ``core``) or the checkout is not laid out as expected, nothing is
written: the script prints one line on stderr saying what, where and what was expected, and exits
2. ``--check`` writes nothing either; it exits 1 with a short diff when the fixture on disk is not
what the checkout generates now, and 0 when it is.

Usage::

    python scripts/loom_contract_fixture.py --loom-checkout tests/fixtures/loom-checkout
    python scripts/loom_contract_fixture.py --loom-checkout ../loom --check

A path names a field inside a JSON value: names joined by ``.``, and ``[]`` after the name of a
list for the list's items (``messages[].role``, ``sections.memories.items[].text``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# --- Nerve's side of the contract -------------------------------------------------------------

ANY = None  # an argument whose value Nerve computes: any value its schema allows
RECALL_SEARCH_TOP_K = 10  # REC-1: how many results the recall's fallback search asks for
MESSAGE_ROLES = ("assistant", "system", "tool", "user")  # SWEEP-3: the roles a transcript holds


@dataclass(frozen=True)
class OpUsage:
    """How Nerve uses one op: each argument path it sends, and the answer paths it reads.

    An argument maps to ``ANY`` or to the tuple of the only values Nerve ever sends for it.
    """

    arguments: Mapping[str, tuple[Any, ...] | None]
    reads: tuple[str, ...]


# The lifecycle calls Nerve's runtime makes itself (LOOM-1; contracts/loom-ops.md).
NERVE_USAGE: dict[str, OpUsage] = {
    # REC-1: startup recall, memories only.
    "context.pack": OpUsage(
        arguments={"mode": ("startup",), "sections": (["memories"],), "namespace": ANY},
        reads=("sections.memories.items[].text", "sections.memories.items[].memory_key"),
    ),
    # REC-1: the recall fallback.
    "search.query": OpUsage(
        arguments={"query": ANY, "top_k": (RECALL_SEARCH_TOP_K,), "namespace": ANY},
        reads=("results[].content_excerpt", "results[].memory_key", "abstained"),
    ),
    # SWEEP-3 (waiting, defer false) and SWEEP-4 (queued, defer true): transcript extraction.
    "memory.set_from_messages": OpUsage(
        arguments={
            "messages[].role": MESSAGE_ROLES,
            "messages[].content": ANY,
            "messages[].created_at": ANY,
            "context[].role": MESSAGE_ROLES,
            "context[].content": ANY,
            "defer": (False, True),
            "namespace": ANY,
            "session_id": ANY,
        },
        reads=("written[].memory_key", "written[].verdict", "accepted", "queue_id"),
    ),
    # LOOM-3: the health probe, which also names the org and namespace Loom resolved.
    "namespace.summary": OpUsage(
        arguments={"namespace": ANY},
        reads=("org", "namespace", "shared_namespaces[]", "memory_count"),
    ),
}

# What the Loom wording tells the agent to send and what it explains of the answer (TXT-3):
# a write with ``proposed: true`` where the agent is not the writer, and the write verdicts.
AGENT_USAGE: dict[str, OpUsage] = {
    "memory.set": OpUsage(
        arguments={"text": ANY, "memory_key": ANY, "namespace": ANY, "proposed": (True,)},
        reads=("verdict", "reason"),
    ),
}

# --- Where things are ---------------------------------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RELATIVE = "tests/fixtures/loom_lifecycle_ops.json"  # CON-1
DEFAULT_OUT = REPO_ROOT / FIXTURE_RELATIVE
GENERATOR = "scripts/loom_contract_fixture.py"

OPS_DIR = "sdk/ops"  # <checkout>/sdk/ops/<op name>.json
OP_FILE_SUFFIX = ".json"
TOOLSETS_FILE = "mcp/toolsets.yaml"
CORE_LIST = "core"  # BACK-4: Loom's default tool list
ANY_OP = "*"  # the op of a tool that calls any op by name (loom_op)
LOOM_WORDING_PREFIX = "loom/"  # golden-relative keys of the Loom renders

EXIT_OK = 0
EXIT_STALE = 1  # --check: the fixture on disk differs from a fresh generation
EXIT_REFUSED = 2  # the checkout and Nerve disagree, or the checkout is not laid out as expected
DIFF_LINES_SHOWN = 40
JSON_INDENT = 2


class Refusal(Exception):
    """The contract cannot be generated; the message is the one line printed before exit 2."""


def refuse(where: str, what: str, expected: str) -> Refusal:
    """A ``Refusal`` reading ``<where>: <what>; expected <expected>``, on a single line."""
    line = f"{where}: {what}; expected {expected}"
    return Refusal(" ".join(line.split()))


# --- A small JSON Schema reader -----------------------------------------------------------------
# Enough of JSON Schema for op schemas: type, enum, const, properties, required, items,
# additionalProperties, bounds, pattern, local $ref and anyOf/oneOf. Other keywords are
# annotations to this reader.

Schema = Mapping[str, Any]
MAX_REF_HOPS = 32  # a longer chain of $ref is taken for a loop

_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, int | float) and not isinstance(value, bool),
    "null": lambda value: value is None,
}


def _deref(schema: Schema, root: Schema) -> Schema:
    """``schema`` with local ``$ref`` (``#/…``) followed; one that resolves to nothing is {}.

    An empty schema declares no fields, so a path through a broken reference is refused.
    """
    for _ in range(MAX_REF_HOPS):
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        node: Any = root
        for part in filter(None, ref[1:].split("/")):
            node = node.get(part) if isinstance(node, Mapping) else None
        schema = node if isinstance(node, Mapping) else {}
    return {}


def _branches(schema: Schema, root: Schema) -> list[Schema]:
    """The alternatives a value may match: the schema itself, or each of its anyOf/oneOf."""
    schema = _deref(schema, root)
    choices = schema.get("anyOf") or schema.get("oneOf")
    if not isinstance(choices, list):
        return [schema]
    return [branch for choice in choices for branch in _branches(choice, root)]


def _property(schema: Schema, name: str, root: Schema) -> list[Schema]:
    found = []
    for branch in _branches(schema, root):
        properties = branch.get("properties")
        if isinstance(properties, Mapping) and isinstance(properties.get(name), Mapping):
            found.append(properties[name])
    return found


def _items(schema: Schema, root: Schema) -> list[Schema]:
    return [
        branch["items"]
        for branch in _branches(schema, root)
        if isinstance(branch.get("items"), Mapping)
    ]


def path_steps(path: str) -> list[str]:
    """``"a.b[].c"`` as steps ``["a", "b", "[]", "c"]``."""
    steps: list[str] = []
    for part in path.split("."):
        name = part.removesuffix("[]")
        steps.append(name)
        steps.extend("[]" for _ in range((len(part) - len(name)) // 2))
    return steps


def schemas_at(schema: Schema, path: str) -> list[Schema]:
    """Every sub-schema that declares ``path``; empty when the schema does not declare it.

    A field counts only when named under ``properties``: a field that only
    ``additionalProperties`` would let through is not declared.
    """
    current = [schema]
    for step in path_steps(path):
        if step == "[]":
            current = [found for node in current for found in _items(node, schema)]
        else:
            current = [found for node in current for found in _property(node, step, schema)]
    return current


def validation_error(value: Any, schema: Schema, root: Schema) -> str | None:
    """Why ``value`` does not match ``schema``, or None when it does."""
    errors = [_branch_error(value, branch, root) for branch in _branches(schema, root)]
    return None if None in errors else errors[0]


def _branch_error(value: Any, schema: Schema, root: Schema) -> str | None:
    checks = (_type_error, _enum_error, _bound_error, _array_error, _object_error)
    for check in checks:
        error = check(value, schema, root)
        if error:
            return error
    return None


def _type_error(value: Any, schema: Schema, _root: Schema) -> str | None:
    wanted = schema.get("type")
    if wanted is None:
        return None
    names = wanted if isinstance(wanted, list) else [wanted]
    if any(_JSON_TYPES.get(name, lambda _value: False)(value) for name in names):
        return None
    return f"{json.dumps(value)} is not of type {' or '.join(map(str, names))}"


def _enum_error(value: Any, schema: Schema, _root: Schema) -> str | None:
    if "const" in schema and value != schema["const"]:
        return f"{json.dumps(value)} is not {json.dumps(schema['const'])}"
    allowed = schema.get("enum")
    if isinstance(allowed, list) and value not in allowed:
        return f"{json.dumps(value)} is not one of {json.dumps(allowed)}"
    return None


def _bound_error(value: Any, schema: Schema, _root: Schema) -> str | None:
    if _JSON_TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{value} is below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{value} is above the maximum {schema['maximum']}"
    if isinstance(value, str):
        if _outside(len(value), schema, "minLength", "maxLength"):
            return f"{json.dumps(value)} has a length outside the schema's bounds"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{json.dumps(value)} does not match {schema['pattern']}"
    return None


def _outside(size: int, schema: Schema, low: str, high: str) -> bool:
    return size < schema.get(low, 0) or (high in schema and size > schema[high])


def _array_error(value: Any, schema: Schema, root: Schema) -> str | None:
    if not isinstance(value, list):
        return None
    if _outside(len(value), schema, "minItems", "maxItems"):
        return f"{json.dumps(value)} has a number of items outside the schema's bounds"
    items = schema.get("items")
    if isinstance(items, Mapping):
        for item in value:
            error = validation_error(item, items, root)
            if error:
                return f"an item of {json.dumps(value)}: {error}"
    return None


def _object_error(value: Any, schema: Schema, root: Schema) -> str | None:
    if not isinstance(value, dict):
        return None
    properties = schema.get("properties") or {}
    missing = [name for name in schema.get("required", []) if name not in value]
    if missing:
        return f"{json.dumps(value)} lacks {', '.join(missing)}"
    for name, item in value.items():
        if name in properties:
            error = validation_error(item, properties[name], root)
        elif schema.get("additionalProperties") is False:
            error = f"{name!r} is not a declared property"
        else:
            extra = schema.get("additionalProperties")
            error = validation_error(item, extra, root) if isinstance(extra, Mapping) else None
        if error:
            return error
    return None


@dataclass(frozen=True)
class Requirements:
    """What a params schema requires of the arguments Nerve sends.

    ``always``: paths every call must carry (required all the way from the top).
    ``when_sent``: paths required inside a field Nerve sends (``context[].role`` once it sends
    ``context``), including ``always``.
    """

    always: frozenset[str]
    when_sent: frozenset[str]


def requirements(schema: Schema, sent: Iterable[str]) -> Requirements:
    """The required paths of ``schema``, looking inside a field only when it is required or
    sent: an optional list Nerve leaves out makes no demands on its items."""
    sent_steps = [path_steps(path) for path in sent]
    always: set[str] = set()
    when_sent: set[str] = set()

    def walk(node: Schema, prefix: list[str], chain_required: bool) -> None:
        for branch in _branches(node, schema):
            required = branch.get("required", [])
            for name, child in (branch.get("properties") or {}).items():
                steps = [*prefix, name]
                is_required = name in required
                if is_required:
                    when_sent.add(join_steps(steps))
                    if chain_required:
                        always.add(join_steps(steps))
                if is_required or any(path[: len(steps)] == steps for path in sent_steps):
                    walk(child, steps, chain_required and is_required)
            if isinstance(branch.get("items"), Mapping):
                walk(branch["items"], [*prefix, "[]"], chain_required)

    walk(schema, [], True)
    return Requirements(frozenset(always), frozenset(when_sent))


def covered(path: str, sent: Iterable[str]) -> bool:
    """True when one of the ``sent`` paths is ``path`` or lies inside it."""
    steps = path_steps(path)
    return any(path_steps(other)[: len(steps)] == steps for other in sent)


def join_steps(steps: Sequence[str]) -> str:
    """The inverse of ``path_steps``."""
    return ".".join(steps).replace(".[]", "[]")


# --- The checkout -------------------------------------------------------------------------------


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


# --- Holding Nerve's usage against the checkout -------------------------------------------------


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


def describe_op(op: str, usage: OpUsage, checkout: Checkout) -> dict[str, Any]:
    """The fixture's entry for ``op``, after checking ``usage`` against its schemas."""
    tool = serving_tool(op, checkout)
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
        for branch in _branches(node, schema.result):
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
        "agent_ops": {op: describe_op(op, usage, checkout) for op, usage in AGENT_USAGE.items()},
        "core_tools": sorted(checkout.core),
        "wording_tools": wording_tools(wording, checkout.core),
    }


def fixture_text(fixture: Mapping[str, Any]) -> str:
    """Stable bytes: sorted keys, indent 2, a trailing newline."""
    return json.dumps(fixture, indent=JSON_INDENT, sort_keys=True) + "\n"


def generate(checkout_root: Path) -> str:
    """The fixture text for the checkout at ``checkout_root``; ``Refusal`` on any disagreement.

    The checkout is checked before the wording is rendered, so a broken checkout fails fast.
    """
    checkout = load_checkout(checkout_root)
    build_fixture(checkout, {})
    return fixture_text(build_fixture(checkout, rendered_loom_wording()))


def stale_diff(out: Path, fresh: str) -> list[str] | None:
    """A unified diff from the fixture at ``out`` to ``fresh``, or None when they are equal."""
    try:
        current = out.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        current = ""
    if current == fresh:
        return None
    label = _display(out)
    return list(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            fromfile=f"{label} (on disk)",
            tofile=f"{label} (generated)",
        )
    )


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Generate tests/fixtures/loom_lifecycle_ops.json from a Loom checkout."
    )
    parser.add_argument("--loom-checkout", type=Path, required=True, help="a Loom checkout")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the fixture to write")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when --out is stale"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, or with ``--check`` compare; the exit status says how it went."""
    args = parse_args(argv)
    try:
        fresh = generate(args.loom_checkout)
    except Refusal as refusal:
        print(f"loom_contract_fixture: refused: {refusal}", file=sys.stderr)
        return EXIT_REFUSED
    if not args.check:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(fresh, encoding="utf-8")
        return EXIT_OK
    diff = stale_diff(args.out, fresh)
    if diff is None:
        return EXIT_OK
    sys.stdout.writelines(diff[:DIFF_LINES_SHOWN])
    if len(diff) > DIFF_LINES_SHOWN:
        print(f"… {len(diff) - DIFF_LINES_SHOWN} more diff lines")
    regenerate = f"python {GENERATOR} --loom-checkout {args.loom_checkout}"
    if args.out.resolve() != DEFAULT_OUT:
        regenerate += f" --out {args.out}"
    print(
        f"loom_contract_fixture: {_display(args.out)} is stale; run {regenerate}", file=sys.stderr
    )
    return EXIT_STALE


if __name__ == "__main__":
    sys.exit(main())
