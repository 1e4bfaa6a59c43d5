"""A small JSON Schema reader, enough for Loom's op schemas.

The generator must tell whether an op's params declare each argument path Nerve sends, allow
each fixed value, and require nothing Nerve leaves out, and whether its result declares each
field Nerve reads. This module answers those questions on its own, without a JSON Schema
library: type, enum, const, properties, required, items, additionalProperties, bounds, pattern,
local $ref and anyOf/oneOf. Other keywords are annotations to this reader.

A path names a field inside a JSON value: names joined by ``.``, and ``[]`` after the name of a
list for the list's items (``messages[].role``, ``sections.memories.items[].text``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def branches(schema: Schema, root: Schema) -> list[Schema]:
    """The alternatives a value may match: the schema itself, or each of its anyOf/oneOf."""
    schema = _deref(schema, root)
    choices = schema.get("anyOf") or schema.get("oneOf")
    if not isinstance(choices, list):
        return [schema]
    return [branch for choice in choices for branch in branches(choice, root)]


def _property(schema: Schema, name: str, root: Schema) -> list[Schema]:
    found = []
    for branch in branches(schema, root):
        properties = branch.get("properties")
        if isinstance(properties, Mapping) and isinstance(properties.get(name), Mapping):
            found.append(properties[name])
    return found


def _items(schema: Schema, root: Schema) -> list[Schema]:
    return [
        branch["items"]
        for branch in branches(schema, root)
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
    errors = [_branch_error(value, branch, root) for branch in branches(schema, root)]
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
        for branch in branches(node, schema):
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
