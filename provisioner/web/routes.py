"""``memory_router``: the routes of the Memory page and its JSON, for Nerve to mount (DOC-3).

* ``GET /api/memory/backend`` — ``{"backend", "kept_in", "dashboard_url"}``;
* ``GET /api/diagnostics/memory`` — the Loom backend's diagnostics (LOOM-4);
* ``GET /memory`` — the page, rendered on the server;
* under Loom only: every edit of memU's store (``POST``, ``PUT``, ``PATCH``, ``DELETE`` under
  ``/api/memory/memu``) answers 409 with a one-line reason. Under memU those paths are not
  routed here, so Nerve's own memU routes serve them.

A Starlette app adds these routes (``routes=[*memory_router(...).routes, ...]``) or mounts the
router; the routes hold the configuration they were built with. Nerve's own app is FastAPI and
includes ``fastapi_router`` instead (``fastapi_routes.py``): the same endpoints, built here by
``memory_endpoints``, without the page and with Nerve's auth dependencies.

Every answer of these routes — the page, the JSON, a 409, a 405 for a method a route does not
take — carries the page's security headers (``PAGE_HEADERS``: no script, no outside resource,
``nosniff``). The JSON is written with ``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e`` and
``\\u0026``: a value from the configuration or from Loom (a dashboard address, an error message)
can hold ``<script>``, and a browser that opened the JSON as a page, or a script that pasted it
into one, would otherwise meet real markup. Parsed as JSON, the text is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from provisioner.config.model import Config
from provisioner.web.page import PAGE_HEADERS, render_memory_page
from provisioner.web.view import MemorySource, backend_view, current_memory, diagnostics_of

MEMU_EDIT_PATH = "/api/memory/memu"
MEMU_EDIT_PATHS = (MEMU_EDIT_PATH, MEMU_EDIT_PATH + "/{rest:path}")  # the store and below it
MEMU_EDIT_METHODS = ["POST", "PUT", "PATCH", "DELETE"]  # DOC-3: memU's edit operations
HTTP_CONFLICT = 409  # DOC-3
HTTP_METHOD_NOT_ALLOWED = 405
Endpoint = Callable[[Request], Awaitable[Response]]
# JSON escapes that keep a document from ever reading as markup (or, pasted into a script, from
# ending it at a line separator); JSON parsers read them back as the same characters.
_MARKUP_SAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


class SafeJSONResponse(JSONResponse):
    """JSON with the page's security headers, and no ``<``, ``>`` or ``&`` left as they are.

    A value JSON cannot carry (a set, a time) is written as a list or as its text rather than
    failing the request.
    """

    def __init__(
        self,
        content: Any,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, status_code, headers={**PAGE_HEADERS, **(headers or {})})

    def render(self, content: Any) -> bytes:
        text = json.dumps(
            content, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_plain
        )
        return text.translate(_MARKUP_SAFE).encode("utf-8")


def _plain(value: Any) -> Any:
    """What ``json`` cannot write itself: sets as sorted lists, anything else as its text."""
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def refused_method(scope: Scope, methods: Collection[str] | None) -> Response | None:
    """The 405 for a method a route does not take, with the page's headers; None if it takes it.

    Starlette's and FastAPI's own 405 are plain text or ``{"detail"}`` without those headers;
    both routers' routes answer this one instead. The matching stays the framework's: a path
    that another route serves with that method still goes to that route.
    """
    if not methods or scope["method"] in methods:
        return None
    allowed = ", ".join(sorted(methods))
    return SafeJSONResponse(
        {"error": f"method {scope['method'][:20]} not allowed here; use {allowed}"},
        HTTP_METHOD_NOT_ALLOWED,
        {"Allow": allowed},
    )


class RefusesWithPageHeaders:
    """Mixed into a route class: a method the route does not serve is answered by
    ``refused_method`` (405 with the page's headers) instead of the framework's bare 405.
    Starlette's ``Route`` and FastAPI's ``APIRoute`` both take it, so the two routers refuse alike.
    """

    methods: set[str] | None

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = refused_method(scope, self.methods)
        if refusal is None:
            await super().handle(scope, receive, send)  # type: ignore[misc]
        else:
            await refusal(scope, receive, send)


class _Route(RefusesWithPageHeaders, Route):
    """A Starlette route whose 405 carries the same headers as the rest (``refused_method``)."""


@dataclass(frozen=True)
class MemoryEndpoints:
    """The answers both routers serve, built once from the configuration (DOC-3, NERVE-4).

    ``memory_router`` (Starlette, the standalone page) and ``fastapi_router`` (Nerve's app) add
    these same endpoints as routes, so a header, an escape or a refusal is written once.
    """

    card: tuple[tuple[str, Endpoint], ...]  # GET routes: the card's JSON
    page: Endpoint  # GET /memory: the server-rendered page (the standalone router only)
    refuse_memu_edits: Endpoint | None  # under Loom: every memU edit, on MEMU_EDIT_PATHS


def memory_endpoints(config: Config, memory: MemorySource = None) -> MemoryEndpoints:
    """The endpoints for ``config``; ``memory`` is the running backend, or how to reach it."""
    view = backend_view(config)

    async def backend(request: Request) -> Response:
        return SafeJSONResponse(view.as_json())

    async def diagnostics(request: Request) -> Response:
        return SafeJSONResponse(diagnostics_of(config, current_memory(memory)))

    async def page(request: Request) -> Response:
        found = diagnostics_of(config, current_memory(memory))
        html = render_memory_page(view, found, _dashboard_set(config))
        return HTMLResponse(html, headers=PAGE_HEADERS)

    refuse = None if config.memory_backend == "memu" else _refuse_memu_edits(view.kept_in)
    card = (("/api/memory/backend", backend), ("/api/diagnostics/memory", diagnostics))
    return MemoryEndpoints(card=card, page=page, refuse_memu_edits=refuse)


def memory_router(config: Config, memory: MemorySource = None) -> Router:
    """The Memory page's routes for ``config``; ``memory`` is the running Loom backend, if any.

    ``memory`` may also be a function answering the backend (or None while none runs), asked
    on every request, for an app whose backend starts after its routes are built.
    """
    endpoints = memory_endpoints(config, memory)
    routes = [_Route(path, endpoint, methods=["GET"]) for path, endpoint in endpoints.card]
    routes.append(_Route("/memory", endpoints.page, methods=["GET"]))
    if endpoints.refuse_memu_edits is not None:
        routes += [
            _Route(path, endpoints.refuse_memu_edits, methods=MEMU_EDIT_METHODS)
            for path in MEMU_EDIT_PATHS
        ]
    return Router(routes=routes)


def _refuse_memu_edits(kept_in: str) -> Endpoint:
    reason = f"memory is kept in {kept_in}; memU's store is not used and cannot be edited"

    async def refuse(request: Request) -> Response:
        return SafeJSONResponse({"error": reason}, HTTP_CONFLICT)

    return refuse


def _dashboard_set(config: Config) -> bool:
    """Whether the configuration names a dashboard at all (the loader may have dropped it)."""
    memory = config.data.get("memory")
    loom = memory.get("loom") if isinstance(memory, dict) else None
    raw = loom.get("dashboard_url") if isinstance(loom, dict) else None
    return bool(raw.strip()) if isinstance(raw, str) else raw is not None
