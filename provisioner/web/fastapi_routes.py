"""``fastapi_router``: the Memory card's JSON and memU's refusals, for Nerve's app (NERVE-4).

Nerve's web app is FastAPI: it includes ``APIRouter`` objects, guards its routes with an auth
dependency, and ends with a single-page-app catch-all (``GET /{path:path}``) that answers every
other ``GET`` with its web UI, its own Memory page included. The Starlette ``memory_router``
cannot be included there, carries no auth, and its ``GET /memory`` would sit over that page.

This router adds the same endpoints as ``memory_router`` (``routes.memory_endpoints``: one
implementation, so headers, escaping and refusals cannot drift apart) as FastAPI routes:

* ``GET /api/memory/backend`` and ``GET /api/diagnostics/memory``, with the page's security
  headers and markup-safe JSON;
* under Loom only, every edit of memU's store (``POST``, ``PUT``, ``PATCH``, ``DELETE`` on
  ``/api/memory/memu`` and below) answers 409 with a one-line reason (DOC-3). Included before
  Nerve's own routes, these routes are found first for Nerve's memU edits; a ``GET`` (Nerve's
  reads of the store) still reaches Nerve's routes. Under memU no route is added on those
  paths, so nothing of Nerve's is shadowed;
* no HTML page: ``/memory`` stays the web UI's.

Every route carries the ``dependencies`` given (Nerve passes its auth dependency), so without
credentials that dependency refuses first — a 409 is only ever told to a signed-in user. A
method a route does not take is answered 405 (with the page's headers and the allowed methods,
nothing else) before dependencies run, as FastAPI does for its own routes.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, params
from fastapi.routing import APIRoute

from provisioner.config.model import Config
from provisioner.web.routes import (
    MEMU_EDIT_METHODS,
    MEMU_EDIT_PATHS,
    RefusesWithPageHeaders,
    memory_endpoints,
)
from provisioner.web.view import MemorySource

# Route names, for ``url_for`` in Nerve's app; prefixed so none can meet a name of Nerve's.
CARD_ROUTE_NAMES = {
    "/api/memory/backend": "provisioner_memory_backend",
    "/api/diagnostics/memory": "provisioner_memory_diagnostics",
}
REFUSAL_ROUTE_NAME = "provisioner_memu_edit_refused"


class _APIRoute(RefusesWithPageHeaders, APIRoute):
    """A FastAPI route whose 405 carries the page's headers, like the Starlette router's."""


def fastapi_router(
    config: Config,
    *,
    memory: MemorySource = None,
    dependencies: Sequence[params.Depends] = (),
) -> APIRouter:
    """The card's routes for ``config`` as an ``APIRouter`` Nerve includes before its own.

    ``memory`` is the running Loom backend, or a function answering it (None while none runs),
    asked on each request: Nerve builds its routes before its lifespan starts the backend. What
    such a function raises is not caught, and that request fails with a 500. ``dependencies``
    are added to every route, refusals included.
    """
    endpoints = memory_endpoints(config, memory)
    router = APIRouter(dependencies=list(dependencies), route_class=_APIRoute)
    for path, endpoint in endpoints.card:
        router.add_api_route(path, endpoint, methods=["GET"], name=CARD_ROUTE_NAMES[path])
    if endpoints.refuse_memu_edits is not None:
        for path in MEMU_EDIT_PATHS:
            router.add_api_route(
                path,
                endpoints.refuse_memu_edits,
                methods=MEMU_EDIT_METHODS,
                name=REFUSAL_ROUTE_NAME,
                include_in_schema=False,  # a refusal, not an API: kept out of Nerve's OpenAPI
            )
    return router
