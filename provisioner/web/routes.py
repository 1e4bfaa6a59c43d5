"""``memory_router``: the routes of the Memory page and its JSON, for Nerve to mount (DOC-3).

* ``GET /api/memory/backend`` — ``{"backend", "kept_in", "dashboard_url"}``;
* ``GET /api/diagnostics/memory`` — the Loom backend's diagnostics (LOOM-4);
* ``GET /memory`` — the page, rendered on the server;
* under Loom only: every edit of memU's store (``POST``, ``PUT``, ``PATCH``, ``DELETE`` under
  ``/api/memory/memu``) answers 409 with a one-line reason. Under memU those paths are not
  routed here, so Nerve's own memU routes serve them.

Nerve adds these routes to its application (``routes=[*memory_router(...).routes, ...]``) or
mounts the router; the routes hold the configuration they were built with.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route, Router

from provisioner.config import Config
from provisioner.web.page import PAGE_HEADERS, render_memory_page
from provisioner.web.view import MemoryDiagnostics, backend_view, diagnostics_of

MEMU_EDIT_PATH = "/api/memory/memu"
MEMU_EDIT_METHODS = ["POST", "PUT", "PATCH", "DELETE"]  # DOC-3: memU's edit operations
HTTP_CONFLICT = 409  # DOC-3


def memory_router(config: Config, memory: MemoryDiagnostics | None = None) -> Router:
    """The Memory page's routes for ``config``; ``memory`` is the running Loom backend, if any."""
    view = backend_view(config)

    async def backend(request: Request) -> Response:
        return JSONResponse(view.as_json())

    async def diagnostics(request: Request) -> Response:
        return JSONResponse(diagnostics_of(config, memory))

    async def page(request: Request) -> Response:
        html = render_memory_page(view, diagnostics_of(config, memory), _dashboard_set(config))
        return HTMLResponse(html, headers=PAGE_HEADERS)

    routes = [
        Route("/api/memory/backend", backend, methods=["GET"]),
        Route("/api/diagnostics/memory", diagnostics, methods=["GET"]),
        Route("/memory", page, methods=["GET"]),
    ]
    if config.memory_backend != "memu":
        refuse = _refuse_memu_edits(view.kept_in)
        routes += [
            Route(MEMU_EDIT_PATH, refuse, methods=MEMU_EDIT_METHODS),
            Route(MEMU_EDIT_PATH + "/{rest:path}", refuse, methods=MEMU_EDIT_METHODS),
        ]
    return Router(routes=routes)


def _refuse_memu_edits(kept_in: str) -> Any:
    reason = f"memory is kept in {kept_in}; memU's store is not used and cannot be edited"

    async def refuse(request: Request) -> Response:
        return JSONResponse({"error": reason}, status_code=HTTP_CONFLICT)

    return refuse


def _dashboard_set(config: Config) -> bool:
    """Whether the configuration names a dashboard at all (the loader may have dropped it)."""
    memory = config.data.get("memory")
    loom = memory.get("loom") if isinstance(memory, dict) else None
    raw = loom.get("dashboard_url") if isinstance(loom, dict) else None
    return bool(raw.strip()) if isinstance(raw, str) else raw is not None
