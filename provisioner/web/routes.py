"""``memory_router``: the routes of the Memory page and its JSON, for Nerve to mount (DOC-3).

* ``GET /api/memory/backend`` — ``{"backend", "kept_in", "dashboard_url"}``;
* ``GET /api/diagnostics/memory`` — the Loom backend's diagnostics (LOOM-4);
* ``GET /memory`` — the page, rendered on the server;
* under Loom only: every edit of memU's store (``POST``, ``PUT``, ``PATCH``, ``DELETE`` under
  ``/api/memory/memu``) answers 409 with a one-line reason. Under memU those paths are not
  routed here, so Nerve's own memU routes serve them.

Nerve adds these routes to its application (``routes=[*memory_router(...).routes, ...]``) or
mounts the router; the routes hold the configuration they were built with.

Every answer of these routes — the page, the JSON, a 409, a 405 for a method a route does not
take — carries the page's security headers (``PAGE_HEADERS``: no script, no outside resource,
``nosniff``). The JSON is written with ``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e`` and
``\\u0026``: a value from the configuration or from Loom (a dashboard address, an error message)
can hold ``<script>``, and a browser that opened the JSON as a page, or a script that pasted it
into one, would otherwise meet real markup. Parsed as JSON, the text is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from provisioner.config.loader import Config
from provisioner.web.page import PAGE_HEADERS, render_memory_page
from provisioner.web.view import MemoryDiagnostics, backend_view, diagnostics_of

MEMU_EDIT_PATH = "/api/memory/memu"
MEMU_EDIT_METHODS = ["POST", "PUT", "PATCH", "DELETE"]  # DOC-3: memU's edit operations
HTTP_CONFLICT = 409  # DOC-3
HTTP_METHOD_NOT_ALLOWED = 405
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


class _Route(Route):
    """A route whose 405, for a method it does not take, carries the same headers as the rest.

    Starlette's own 405 is plain text without them. The matching is Starlette's: a path that
    another route serves with that method still goes to that route.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            allowed = ", ".join(sorted(self.methods))
            response = SafeJSONResponse(
                {"error": f"method {scope['method'][:20]} not allowed here; use {allowed}"},
                HTTP_METHOD_NOT_ALLOWED,
                {"Allow": allowed},
            )
            await response(scope, receive, send)
        else:
            await super().handle(scope, receive, send)


def memory_router(config: Config, memory: MemoryDiagnostics | None = None) -> Router:
    """The Memory page's routes for ``config``; ``memory`` is the running Loom backend, if any."""
    view = backend_view(config)

    async def backend(request: Request) -> Response:
        return SafeJSONResponse(view.as_json())

    async def diagnostics(request: Request) -> Response:
        return SafeJSONResponse(diagnostics_of(config, memory))

    async def page(request: Request) -> Response:
        html = render_memory_page(view, diagnostics_of(config, memory), _dashboard_set(config))
        return HTMLResponse(html, headers=PAGE_HEADERS)

    routes: list[Route] = [
        _Route("/api/memory/backend", backend, methods=["GET"]),
        _Route("/api/diagnostics/memory", diagnostics, methods=["GET"]),
        _Route("/memory", page, methods=["GET"]),
    ]
    if config.memory_backend != "memu":
        refuse = _refuse_memu_edits(view.kept_in)
        routes += [
            _Route(MEMU_EDIT_PATH, refuse, methods=MEMU_EDIT_METHODS),
            _Route(MEMU_EDIT_PATH + "/{rest:path}", refuse, methods=MEMU_EDIT_METHODS),
        ]
    return Router(routes=routes)


def _refuse_memu_edits(kept_in: str) -> Any:
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
