"""The few memory settings the Loom backend needs, read strictly by the runtime itself (NERVE-5).

Nerve's engine builds ``LoomMemory`` from Nerve's own configuration, which this package does not
load: the mapping Nerve merges from its layers (``memory.backend``, ``memory.loom.*``, and
``mcp_gateway_url`` at the top level), or a config object of the same shape, whose sections are
attributes (Nerve's dataclasses) rather than keys. The runtime imports nothing of
``provisioner.config``, so it reads those keys here, by the rules the configuration loader holds
them to (CONF-4…CONF-6). A value it cannot use raises one ``ValueError`` line naming the key,
what it is, and what is expected; nothing is guessed. Keys it does not use are not looked at:
Nerve's own loader and ``nerve doctor`` speak about those.

The same checks guard the plain values ``LoomMemory(...)`` takes, blamed on the parameter.
The provisioning side shares the naming rule and the boolean words, so this module imports the
standard library only: importing it loads no HTTP client.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from provisioner.runtime.gateway.masking import masked

MEMU_BACKEND = "memu"  # CONF-4: the default backend, also when memory.backend is unset or empty
LOOM_BACKEND = "loom"  # CONF-4
ENGINE_BACKENDS = (MEMU_BACKEND, LOOM_BACKEND)  # CONF-4: what memory.backend may name
LOOM_NAME_MAX = 63  # CONF-5
LOOM_NAME_PATTERN = re.compile(rf"[a-z][a-z0-9_-]{{0,{LOOM_NAME_MAX - 1}}}")  # CONF-5
LOOM_NAME_RULE = (
    f"1 to {LOOM_NAME_MAX} characters of a-z, 0-9, '-' or '_', starting with a letter"  # CONF-5
)
BOOLEAN_WORDS = {"true": True, "false": False}  # CONF-3, CONF-5: what `${VAR:-false}` can give
GATEWAY_URL_EXAMPLE = "http://127.0.0.1:8787"  # CONF-6: the shape of a usable gateway URL
SWEEP_CONCURRENCY_DEFAULT = 4  # SWEEP-14: session windows a sweep may have in flight at most
SWEEP_CONCURRENCY_MIN = 1  # SWEEP-14: one window at a time, as a sweep ran before
SWEEP_CONCURRENCY_MAX = 32  # our choice: past this one agent's sweep would crowd Loom out
WHOLE_NUMBER_MAX_CHARS = 12  # our choice: longer text is no count worth converting
SHOWN_MAX_CHARS = 40  # our choice: how much of a refused value an error line quotes
# Values that are never a section: a section is a mapping or an object with attributes.
_NOT_SECTIONS = (str, bytes, bytearray, int, float, bool, list, tuple, set, frozenset)


class LoomSettingsLike(Protocol):
    """What the backend reads of ``memory.loom`` (``provisioner.backends.LoomSettings``)."""

    @property
    def org(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def defer_extraction(self) -> bool: ...
    @property
    def sweep_concurrency(self) -> int: ...


class ConfigLike(Protocol):
    """What the backend reads of a loaded configuration (``provisioner.config.model.Config``).

    A protocol rather than the class itself: the runtime imports nothing of the provisioning
    half, so Nerve's engine can build the backend without loading the config loader.
    """

    @property
    def memory_backend(self) -> str: ...
    @property
    def mcp_gateway_url(self) -> str | None: ...
    @property
    def loom(self) -> LoomSettingsLike: ...


@dataclass(frozen=True)
class LoomValues:
    """The checked values a ``LoomMemory`` is built from (CONF-5, CONF-6).

    ``gateway_url`` has no trailing slash, or is None for no gateway (the backend is then
    unavailable, never broken); ``org`` and ``namespace`` are overrides of what Loom resolves,
    or None; ``defer_extraction`` picks the sweep's queued mode (SWEEP-4);
    ``sweep_concurrency`` is how many sessions' windows a sweep may have in flight (SWEEP-14).
    """

    gateway_url: str | None = None
    org: str | None = None
    namespace: str | None = None
    defer_extraction: bool = False
    sweep_concurrency: int = SWEEP_CONCURRENCY_DEFAULT


def checked_values(
    *,
    gateway_url: object,
    org: object,
    namespace: object,
    defer_extraction: object,
    sweep_concurrency: object = None,
    keys: tuple[str, str, str, str, str] = (
        "gateway_url",
        "org",
        "namespace",
        "defer_extraction",
        "sweep_concurrency",
    ),
) -> LoomValues:
    """The values, each held to its rule; ``ValueError`` names ``keys[i]`` for a bad one."""
    return LoomValues(
        gateway_url=gateway_url_value(gateway_url, keys[0]),
        org=loom_name_value(org, keys[1]),
        namespace=loom_name_value(namespace, keys[2]),
        defer_extraction=boolean_value(defer_extraction, keys[3]),
        sweep_concurrency=sweep_concurrency_value(sweep_concurrency, keys[4]),
    )


def memory_backend(settings: object) -> str:
    """``memory.backend`` of Nerve-shaped settings: ``memu`` (also when unset) or ``loom``.

    ``settings`` is the merged mapping or a config object of its shape. Raises ``ValueError``
    naming the key for anything else, such as ``Loom`` or a list (CONF-4): an engine that took a
    typo for memU would keep memories where nobody looks for them.
    """
    memory = _section(_get(_root(settings), "memory"), "memory")
    value = _get(memory, "backend")
    if value is None or value == "":
        return MEMU_BACKEND
    if isinstance(value, str) and value in ENGINE_BACKENDS:
        return value
    shown = repr(value) if isinstance(value, str) else _kind(value)
    raise ValueError(
        f"memory.backend: {shown} is not a memory backend; expected one of: "
        f"{', '.join(ENGINE_BACKENDS)}"
    )


def loom_values(settings: object) -> LoomValues:
    """What ``LoomMemory`` needs of Nerve-shaped ``settings`` whose backend is ``loom``.

    Reads ``memory.backend`` (it must be ``loom``), ``memory.loom.org``, ``.namespace``,
    ``.defer_extraction``, ``.sweep_concurrency`` and the top-level ``mcp_gateway_url``; an
    empty or unset gateway URL is no gateway. Raises ``ValueError`` naming the key of the first
    value it cannot use.
    """
    backend = memory_backend(settings)
    if backend != LOOM_BACKEND:
        memory = _get(_root(settings), "memory")
        hint = ""
        if memory is not None and not isinstance(memory, Mapping) and not _has(memory, "backend"):
            hint = (
                f" ({type(memory).__name__} has no 'backend' field; pass the merged "
                "configuration mapping instead)"
            )
        raise ValueError(
            f"memory.backend: {backend!r} is not {LOOM_BACKEND!r}; LoomMemory serves only "
            f"memory.backend: {LOOM_BACKEND}{hint}"
        )
    root = _root(settings)
    loom = _section(_get(_get(root, "memory"), LOOM_BACKEND), "memory.loom")
    return checked_values(
        gateway_url=_get(root, "mcp_gateway_url"),
        org=_get(loom, "org"),
        namespace=_get(loom, "namespace"),
        defer_extraction=_get(loom, "defer_extraction"),
        sweep_concurrency=_get(loom, "sweep_concurrency"),
        keys=(
            "mcp_gateway_url",
            "memory.loom.org",
            "memory.loom.namespace",
            "memory.loom.defer_extraction",
            "memory.loom.sweep_concurrency",
        ),
    )


def gateway_url_value(value: object, key: str) -> str | None:
    """A plain absolute http(s) base URL without a trailing slash; blank or None is none (CONF-6).

    No credentials, query or fragment, no blanks or control characters inside. An error never
    quotes a user or password back.
    """
    text = value.strip() if isinstance(value, str) else value
    if text is None or text == "":
        return None
    expected = f"expected an absolute http or https URL such as {GATEWAY_URL_EXAMPLE}"
    if not isinstance(text, str):
        raise ValueError(f"{key}: is {_kind(text)}; {expected}")
    shown = masked(text)  # REL-14
    if any(char.isspace() or not char.isprintable() for char in text):
        raise ValueError(f"{key}: {shown!r} has blanks or control characters in it; {expected}")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError(f"{key}: {shown!r} is not a usable URL; {expected}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{key}: {shown!r} is not a usable URL; {expected}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{key}: {shown!r} has credentials in it; expected a URL without user or password "
            "(the gateway knows the agent from its connection)"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"{key}: {shown!r} has a query or fragment; expected a plain base URL")
    return text.rstrip("/")


def loom_name_value(value: object, key: str) -> str | None:
    """An org or namespace override held to Loom's naming rule; empty or None is none (CONF-5)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and LOOM_NAME_PATTERN.fullmatch(value):
        return value
    shown = repr(value) if isinstance(value, str) else _kind(value)
    raise ValueError(f"{key}: {shown} is not a Loom name; expected {LOOM_NAME_RULE}")


def boolean_value(value: object, key: str, default: bool = False) -> bool:
    """A boolean, or the words true/false in any case, which a ``${VAR:-false}`` gives (CONF-5)."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[value.strip().lower()]
    shown = repr(value) if isinstance(value, str) else _kind(value)
    raise ValueError(f"{key}: {shown} is not a boolean; expected true or false")


def sweep_concurrency_value(value: object, key: str) -> int:
    """How many sessions' windows one sweep may have in flight at most (SWEEP-14).

    A whole number from 1 to 32; empty or None is the default, 4. More windows at once only
    help while Loom keeps up, and the sweep's own limit adapts below this cap; 1 sweeps one
    session at a time. Anything else raises ``ValueError`` naming ``key``.
    """
    return whole_number_value(
        value,
        key,
        default=SWEEP_CONCURRENCY_DEFAULT,
        low=SWEEP_CONCURRENCY_MIN,
        high=SWEEP_CONCURRENCY_MAX,
    )


def whole_number_value(value: object, key: str, *, default: int, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high``; empty or None is ``default``.

    An integer, or its ASCII digits as text (what a ``${VAR:-4}`` gives, blanks around them
    allowed). A boolean, a fraction, digits of another script (``٤``) or a number out of range
    raise one ``ValueError`` line naming ``key``; the value is quoted cut short.
    """
    if value is None or value == "":
        return default
    number = _whole_number(value)
    if number is not None and low <= number <= high:
        return number
    raise ValueError(
        f"{key}: {_shown(value)} is not a whole number from {low} to {high}; "
        f"expected one such as {default}"
    )


def _whole_number(value: object) -> int | None:
    """``value`` as an int when it is one or spells one in ASCII digits; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if 0 < len(text) <= WHOLE_NUMBER_MAX_CHARS and text.isascii() and text.isdigit():
            return int(text)
    return None


def _shown(value: object) -> str:
    """A refused value for an error line: text quoted and cut short, a small integer as it
    is, anything else by its kind (an integer of thousands of digits is never converted)."""
    if isinstance(value, str):
        text = repr(value)
        return text if len(text) <= SHOWN_MAX_CHARS else text[:SHOWN_MAX_CHARS] + "…"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value) if value.bit_length() <= 64 else "an integer of more than 64 bits"
    return _kind(value)


# --- reading a mapping or an object alike ---------------------------------------------------


def _root(settings: object) -> object:
    if isinstance(settings, Mapping) or _is_object(settings):
        return settings
    raise ValueError(
        f"settings: is {_kind(settings)}; expected Nerve's merged configuration (a mapping "
        "with memory and mcp_gateway_url) or a config object of that shape"
    )


def _section(value: object, key: str) -> object:
    """A section's value: None (absent), a mapping or an object; ``ValueError`` otherwise."""
    if value is None or isinstance(value, Mapping) or _is_object(value):
        return value
    raise ValueError(f"{key}: is {_kind(value)}; expected a mapping")


def _is_object(value: object) -> bool:
    """An object whose settings are attributes: a dataclass, a namespace, a plain instance."""
    if isinstance(value, (*_NOT_SECTIONS, type)):
        return False
    return dataclasses.is_dataclass(value) or hasattr(value, "__dict__")


def _get(section: object, name: str) -> Any:
    if section is None:
        return None
    if isinstance(section, Mapping):
        return section.get(name)
    return getattr(section, name, None)


def _has(section: object, name: str) -> bool:
    if isinstance(section, Mapping):
        return name in section
    return hasattr(section, name)


def _kind(value: object) -> str:
    """How an error names a value's type: ``a list``, ``an int``, ``null``."""
    if value is None:
        return "null"
    name = {"str": "string", "bool": "boolean", "dict": "mapping"}.get(
        type(value).__name__, type(value).__name__
    )
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"
