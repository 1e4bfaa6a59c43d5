"""What the Memory page and its JSON routes say, built from the configuration and diagnostics.

Kept apart from the routes and the HTML so each answer is a plain value a test can compare:
``backend_view`` is ``GET /api/memory/backend``, ``diagnostics_of`` is ``GET
/api/diagnostics/memory``, and ``card_rows`` flattens the diagnostics into the label/value rows
of the Diagnostics card. Every value stays a string here; escaping is the template's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeAlias, runtime_checkable

from provisioner.backends import get_backend
from provisioner.config.model import Config
from provisioner.config.urls import absolute_http_url
from provisioner.runtime.face import failure_words

CARD_MAX_ROWS = 60  # our choice: a diagnostics dict is a dozen values
CARD_MAX_DEPTH = 3  # our choice: diagnostics nest two levels at most
VALUE_MAX_CHARS = 500  # our choice: a last-error message is one line of a few hundred
TIME_KEYS = ("at", "when", "time", "closes_at", "opened_at", "last_success_at")
EPOCH_MIN = 1_000_000_000  # a number this large under a time key is Unix time (2001 on)

# Labels for the keys of LoomMemory's diagnostics; any other key is shown by its own name.
LABELS = {
    "gateway_url": "gateway",
    "lists_loom": "lists loom",
    "loom_tools": "Loom's tools",
    "read_error": "last read failed",
    "org_source": "org from",
    "namespace_source": "namespace from",
    "open_for_s": "open for (s)",
    "retry_in_s": "closes in (s)",
    "consecutive_failures": "failures in a row",
    "kind": "outcome",
    "at": "when",
}


def safe_link(url: str | None) -> str | None:
    """``url`` when it may become the page's ``href``, else None (CONF-5).

    The dashboard address comes from configuration, which a platform, an environment
    variable or a hostile workspace may have filled. Only an absolute ``http`` or ``https``
    URL with a host becomes a link: ``javascript:``, ``data:``, a relative path, or anything
    with blanks or control characters in it (which browsers strip, turning ``java\\tscript:``
    back into a scheme) stays plain text. The loader drops such values already; the page
    checks again, because a ``Config`` can be built without the loader.
    """
    if not url or absolute_http_url(url) is None:
        return None
    return url


@runtime_checkable
class MemoryDiagnostics(Protocol):
    """What the router needs of a memory backend: ``LoomMemory`` is the real one."""

    def diagnostics(self) -> Mapping[str, Any]: ...


# The backend itself, or a function answering it (None while none runs): Nerve builds its routes
# before its lifespan starts the backend, so its routers ask for the backend on each request.
MemorySource: TypeAlias = MemoryDiagnostics | Callable[[], MemoryDiagnostics | None] | None


def current_memory(memory: MemorySource) -> MemoryDiagnostics | None:
    """The backend ``memory`` stands for now; whatever a function raises is left to rise."""
    if memory is None or isinstance(memory, MemoryDiagnostics):
        return memory
    return memory()


@dataclass(frozen=True)
class BackendView:
    """Where memory is kept, as ``GET /api/memory/backend`` answers it (DOC-3)."""

    backend: str
    kept_in: str
    dashboard_url: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "kept_in": self.kept_in,
            "dashboard_url": self.dashboard_url,
        }


@dataclass(frozen=True)
class Row:
    """One line of the Diagnostics card."""

    label: str
    value: str
    depth: int = 0


def backend_view(config: Config) -> BackendView:
    """The configured backend; the dashboard link only for an absolute http(s) URL (CONF-5)."""
    backend = get_backend(config.memory_backend)
    link = safe_link(config.loom.dashboard_url) if config.memory_backend == "loom" else None
    return BackendView(backend.name, backend.display_name, link)


def diagnostics_of(config: Config, memory: MemoryDiagnostics | None) -> dict[str, Any]:
    """The backend's diagnostics (LOOM-4), or what the configuration alone can say."""
    view = backend_view(config)
    if config.memory_backend != "loom":
        return {"backend": view.backend, "kept_in": view.kept_in}
    if memory is None:
        return {
            "backend": view.backend,
            "available": False,
            "gateway_url": config.mcp_gateway_url,
            "reason": "the Loom backend is not running in this process",
        }
    return {"backend": view.backend, **dict(memory.diagnostics())}


def card_rows(diagnostics: Mapping[str, Any]) -> list[Row]:
    """The diagnostics as label/value rows, nested mappings indented under their key."""
    rows: list[Row] = []
    _add_rows(rows, diagnostics, 0)
    return rows[:CARD_MAX_ROWS]


def _add_rows(rows: list[Row], mapping: Mapping[str, Any], depth: int) -> None:
    for key, value in mapping.items():
        label = LABELS.get(str(key), str(key).replace("_", " "))
        if depth == 0:
            label = label[:1].upper() + label[1:]
        if isinstance(value, Mapping) and value and depth + 1 < CARD_MAX_DEPTH:
            rows.append(Row(label, "", depth))
            _add_rows(rows, value, depth + 1)
        elif key == "kind" and isinstance(value, str):
            rows.append(Row(label, _outcome(value, mapping), depth))
        else:
            rows.append(Row(label, shown(str(key), value), depth))


def _outcome(kind: str, error: Mapping[str, Any]) -> str:
    """A kept error's outcome in words, its class after them for whoever searches for it
    (FLEET-4); a kind without words is shown as it was kept."""
    words = failure_words(kind, error.get("code"), error.get("message") or "")
    return shown("kind", kind if words == kind else f"{words} ({kind})")


def shown(key: str, value: Any) -> str:
    """One value as text: times in UTC, lists joined, nothing missing shown as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float) and key in TIME_KEYS and value >= EPOCH_MIN:
        moment = datetime.fromtimestamp(value, tz=UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, list | tuple | set | frozenset):
        text = ", ".join(shown(key, item) for item in value) or "none"
    else:
        text = str(value)
    if len(text) > VALUE_MAX_CHARS:
        return text[: VALUE_MAX_CHARS - 1] + "…"
    return text
