"""The Memory page and its Diagnostics card, for Nerve's web UI (DOC-3; extra ``web``).

``memory_router(config, memory=None)`` returns a Starlette router that Nerve mounts next to
its own routes. It tells the UI where memory is kept: under memU, in memU's store, whose pages
stay Nerve's own; under Loom, in Loom, with the dashboard link when one is set, and memU's edit
routes answering 409, because memU's store means nothing while Loom holds memory.

Only this package imports Starlette. The runtime never imports it, and nothing else in
``provisioner`` does either, so an engine without the ``web`` extra never needs it.
"""

from provisioner.web.routes import memory_router

__all__ = ["memory_router"]
