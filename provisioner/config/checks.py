"""The checks of the keys this package owns, after the layers are merged (CONF-4…CONF-7).

``memory.backend``, the configured backend's own section (``memory.<name>``, whose keys and
checks are on its registry entry) and ``mcp_gateway_url`` are checked here; every other key is
carried through. A value that cannot be used raises ``ConfigError`` blamed on the file it came
from; one that does not stop Nerve (an unknown key, say) becomes a warning.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provisioner.backends import (
    BACKEND_NAMES,
    BACKENDS,
    DEFAULT_BACKEND,
    NERVE_MEMORY_KEYS,
    UnknownBackend,
    get_backend,
)
from provisioner.config.model import (
    ConfigError,
    ConfigFile,
    joined_key,
    kind_of,
    located,
    source_of,
)
from provisioner.config.urls import absolute_http_url, has_credentials, redacted
from provisioner.runtime.face import boolean_value as runtime_boolean_value
from provisioner.runtime.face import whole_number_value

LOCKDOWN_KEY = "lockdown"  # CONF-3: read from settings.yaml only
GATEWAY_URL_KEY = "mcp_gateway_url"  # CONF-6
DASHBOARD_URL_KEY = "memory.loom.dashboard_url"  # CONF-5
TOP_LEVEL_KEYS = (LOCKDOWN_KEY, GATEWAY_URL_KEY, "memory")  # the top-level keys checked here
# FLEET-4, NERVE-5: the top-level keys Nerve itself reads (the fields of its NerveConfig, and
# the tokens its key check allows), carried through unchecked; any other top-level key warns.
NERVE_TOP_LEVEL_KEYS = (
    "workspace",
    "timezone",
    "deployment",
    "quiet_start",
    "quiet_end",
    "provider",
    "gateway",
    "agent",
    "telegram",
    "sync",
    "cron",
    "workspace_sync",
    "backup",
    "sessions",
    "retention",
    "auth",
    "channels",
    "notifications",
    "docker",
    "proxy",
    "ollama",
    "codex",
    "workflows",
    "houseofagents",
    "langfuse",
    "xmemory",
    "mcp_endpoint",
    "mcp_servers",
    "external_agents",
    "anthropic_api_key",
    "openai_api_key",
    "brave_search_api_key",
    "claude_oauth_token",
    "github_token",
)
# FLEET-4: how close an unknown key must be to a known one to be named as a likely typo
# (difflib's ratio; "memroy" is 0.83 from "memory").
LIKELY_TYPO_RATIO = 0.8


def memory_keys() -> tuple[str, ...]:
    """The keys known under ``memory`` (CONF-7, NERVE-5).

    ``backend``, one section per backend, and Nerve's own keys, which Nerve reads and this
    loader carries through unchecked; any other key warns.
    """
    return ("backend", *sorted(BACKEND_NAMES), *NERVE_MEMORY_KEYS)


def known_keys() -> tuple[str, ...]:
    """Every dotted key this loader knows, sections included, for docs held to the schema.

    A backend's section is listed with the keys its registry entry declares; a section
    without declared keys (memU's) is carried through unchecked, so only its name is known,
    and so are Nerve's own keys under ``memory``, whatever their values.
    """
    keys = [*TOP_LEVEL_KEYS, *(f"memory.{key}" for key in memory_keys())]
    for name in sorted(BACKEND_NAMES):
        section = BACKENDS[name].settings
        if section is not None:
            keys.extend(f"memory.{name}.{key}" for key in section.keys)
    return tuple(keys)


def _likely(key: Any, known: tuple[str, ...]) -> str:
    """`` did you mean memory?`` when ``key`` is a likely typo of a known key, else ``""``."""
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=LIKELY_TYPO_RATIO)
    return f" did you mean {close[0]}?" if close else ""


def misspelt_own_keys(merged: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """Each unknown top-level key that is a likely typo of one of this package's own keys, with
    that key: ``[("memroy", "memory")]``. Such a configuration leaves the backend at its default
    without naming it, so what a command would say of memory is a guess (FLEET-4)."""
    known = (*TOP_LEVEL_KEYS, *NERVE_TOP_LEVEL_KEYS)
    found = []
    for key in merged:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=LIKELY_TYPO_RATIO)
        if close and close[0] in TOP_LEVEL_KEYS:
            found.append((str(key), close[0]))
    return found


class KeyChecker:
    """Checks of merged values, each blamed on the file the value came from."""

    def __init__(
        self, sources: Mapping[str, Path], warnings: list[str], files: list[ConfigFile]
    ) -> None:
        self.sources = sources
        self.warnings = warnings
        read = [f.path for f in files if f.read]
        self.fallback = read[-1] if read else None

    def where(self, key: str) -> Path | None:
        return source_of(self.sources, key) or self.fallback

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.where(key), key, problem)

    def warn(self, key: str, problem: str) -> None:
        self.warnings.append(located(self.where(key), key, problem))

    def mapping(self, key: str, value: Any, known: tuple[str, ...]) -> Mapping[Any, Any]:
        """``value`` as a mapping (absent or null is empty); unknown keys warn (CONF-7)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            expected = ", ".join(known)
            raise self.fail(key, f"is {kind_of(value)}; expected a mapping with keys: {expected}")
        for item_key in value:
            if item_key not in known:
                self.warn(
                    joined_key(key, item_key),
                    f"unknown key, ignored;{_likely(item_key, known)} known keys under {key}: "
                    f"{', '.join(known)}",
                )
        return value

    def top_level(self, merged: Mapping[Any, Any]) -> None:
        """Warn of each top-level key neither this package nor Nerve reads (FLEET-4), naming
        the key it probably meant when one is close: ``memroy`` would otherwise leave memory
        at its defaults without a word."""
        known = (*TOP_LEVEL_KEYS, *NERVE_TOP_LEVEL_KEYS)
        for key in merged:
            if key not in known:
                likely = _likely(key, known)
                self.warn(
                    str(key), f"unknown key, ignored;{likely}" if likely else "unknown key, ignored"
                )

    def backend(self, value: Any) -> str:
        """``memory.backend``: one of the registry's names; absent or empty means memU (CONF-4)."""
        if value is None or value == "":
            return DEFAULT_BACKEND
        try:
            return get_backend(value).name
        except UnknownBackend as exc:
            raise self.fail("memory.backend", str(exc)) from None

    def boolean(self, key: str, value: Any, default: bool) -> bool:
        """A YAML boolean, or the words true/false (``SectionReader``)."""
        return boolean_value(value, default, self.where(key), key)

    def whole_number(self, key: str, value: Any, default: int, *, low: int, high: int) -> int:
        """A whole number from ``low`` to ``high``, or its ASCII digits from a ``${VAR:-4}``;
        empty or absent is ``default`` (``SectionReader``).

        The runtime's reader decides, so the loader refuses exactly what ``LoomMemory`` built
        from Nerve's settings refuses (``memory.loom.sweep_concurrency``, SWEEP-14); the
        refusal is a ``ConfigError`` naming the file, with the runtime's wording.
        """
        try:
            return whole_number_value(value, key, default=default, low=low, high=high)
        except ValueError as error:
            raise self.fail(key, str(error).removeprefix(f"{key}: ")) from None

    def http_url(self, value: Any) -> str | None:
        """``value`` when it is an absolute http(s) URL with a host (``SectionReader``)."""
        if isinstance(value, str) and absolute_http_url(value) is not None:
            return value
        return None

    def quoted(self, text: str) -> str:
        """``text`` quoted, a URL's user and password hidden (``SectionReader``)."""
        return redacted(text)

    def refuse_credentials(self, key: str, url: str | None, *, why: str) -> None:
        """Refuse an http(s) ``url`` with a user or password in it (CONF-5, CONF-6).

        The error names the file and ``key`` and says ``why``; it quotes the URL without its
        secret. ``None``, or anything that is not an absolute http(s) URL, passes (other checks
        judge those).
        """
        if url is None:
            return
        parts = absolute_http_url(url)
        if parts is not None and has_credentials(parts):
            raise self.fail(
                key,
                f"{redacted(url)} has credentials in it; expected a URL without user or "
                f"password ({why})",
            )

    def gateway_url(self, value: Any) -> str | None:
        """``mcp_gateway_url``: an http(s) base URL without credentials; empty is none (CONF-6)."""
        key = GATEWAY_URL_KEY
        text = value.strip() if isinstance(value, str) else value
        if text is None or text == "":
            return None
        expected = "expected an absolute http or https URL such as http://127.0.0.1:8787"
        if not isinstance(text, str):
            raise self.fail(key, f"{text!r} is {kind_of(text)}; {expected}")
        parts = absolute_http_url(text)
        if parts is None:
            raise self.fail(key, f"{redacted(text)} is not a usable URL; {expected}")
        self.refuse_credentials(key, text, why="the gateway knows the agent from its connection")
        if parts.query or parts.fragment:
            raise self.fail(
                key, f"{redacted(text)} has a query or fragment; expected a plain base URL"
            )
        return text.rstrip("/")


def boolean_value(value: Any, default: bool, path: Path | None, key: str) -> bool:
    """A YAML boolean, or the words true/false a ``${VAR:-false}`` reference gives.

    The runtime's reader decides what is a boolean, so the loader and ``LoomMemory`` built
    from Nerve's settings accept the same words; a refusal is a ``ConfigError`` naming the file.
    """
    try:
        return runtime_boolean_value(value, key, default)
    except ValueError:
        raise ConfigError(
            path, key, f"{value!r} is not a boolean; expected true or false"
        ) from None
