"""The Memory page and its Diagnostics card, for Nerve's web UI (DOC-3, NERVE-4; extra ``web``).

``memory_router(config, memory=None)`` returns a Starlette router with the page and its JSON,
for a Starlette app (the standalone page). ``fastapi_router(config, *, memory=None,
dependencies=())`` returns the same JSON routes as a FastAPI ``APIRouter`` that Nerve's own app
includes, with its auth dependencies and without a page over Nerve's web UI. Both tell the UI
where memory is kept: under memU, in memU's store, whose pages stay Nerve's own; under Loom, in
Loom, with the dashboard link when one is set, and memU's edit routes answering 409, because
memU's store means nothing while Loom holds memory.

Only this package imports Starlette, and FastAPI only once ``fastapi_router`` is asked for
(importing ``provisioner.web`` does not load it). The runtime never imports either, and nothing
else in ``provisioner`` does, so an engine without the ``web`` extra never needs them. Imports
`backends`, `base`, `config` and `runtime`; imported by `cli` and `integrations`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.web.routes import memory_router

if TYPE_CHECKING:
    from provisioner.web.fastapi_routes import fastapi_router

__all__ = ["fastapi_router", "memory_router"]


def __getattr__(name: str) -> Any:
    """``fastapi_router`` on first use: FastAPI is loaded only by those who ask for it."""
    if name == "fastapi_router":
        from provisioner.web.fastapi_routes import fastapi_router

        return fastapi_router
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
