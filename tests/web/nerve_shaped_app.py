"""A FastAPI app shaped like Nerve's web app, for the tests of ``fastapi_router`` (NERVE-4).

Written for these tests from facts about Nerve's gateway (its code is not copied): the app is
built in a factory with a lifespan that starts the engine after the routes exist; its REST
routes come from ``APIRouter`` objects included in order; every API route takes an auth dependency
that reads a session token from a cookie, a bearer header or a query parameter and answers 401
without one; the memU routes are a read (``GET /api/memory/memu``, its audit and health) and
four edits with JSON bodies (``POST /api/memory/memu/categories``, ``PATCH`` and ``DELETE
/api/memory/memu/items/{item_id}``, ``PATCH /api/memory/memu/categories/{category_id}``); there
are other memory and diagnostics routes next to them; CORS and gzip middleware wrap it all; and
the last route is the single-page-app catch-all, ``GET /{path:path}``, answering the web UI's
HTML for every other path (``/memory`` included).

Each of Nerve's memU handlers here records that it ran, so a test can tell Nerve's answer from
the provisioner's by more than the status code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

TOKEN = "a-session-token-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SPA_MARKER = "nerve-web-ui"
SPA_HTML = f'<!doctype html><html><body><div id="{SPA_MARKER}"></div></body></html>'

# Nerve's own memU edits, as a request a test can send: (method, path, JSON body).
NERVE_MEMU_EDITS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/api/memory/memu/categories", {"name": "tea", "description": "drinks"}),
    ("PATCH", "/api/memory/memu/items/item-1", {"content": "lemon"}),
    ("DELETE", "/api/memory/memu/items/item-1", None),
    ("PATCH", "/api/memory/memu/categories/cat-1", {"summary": "drinks"}),
]
# Nerve's other routes a user meets next to them (reads, files, diagnostics, the web UI).
NERVE_OTHER_REQUESTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/memory/memu", None),
    ("GET", "/api/memory/memu/audit", None),
    ("GET", "/api/memory/memu/health", None),
    ("GET", "/api/memory/files", None),
    ("GET", "/api/memory/file/MEMORY.md", None),
    ("PUT", "/api/memory/file/MEMORY.md", {"content": "# Memory\n"}),
    ("GET", "/api/diagnostics", None),
    ("GET", "/health", None),
    ("GET", "/memory", None),
    ("GET", "/sessions/abc", None),
]


async def require_token(request: Request) -> dict[str, str]:
    """The auth dependency: a session token from cookie, bearer header or query, else 401."""
    token = request.cookies.get("nerve_token") or request.query_params.get("token")
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        token = header.removeprefix("Bearer ")
    if not token:
        raise HTTPException(status_code=401, detail="Not authenticated")
    if token != TOKEN:
        raise HTTPException(status_code=401, detail="Invalid token")
    return {"sub": "user"}


_USER = Depends(require_token)  # as each of Nerve's API routes takes it


class _CategoryCreate(BaseModel):
    name: str
    description: str = ""


class _ItemUpdate(BaseModel):
    content: str | None = None
    memory_type: str | None = None


class _CategoryUpdate(BaseModel):
    summary: str | None = None
    description: str | None = None


class _FileWrite(BaseModel):
    content: str


@dataclass
class NerveShaped:
    """The app, what its memU handlers served (method, path), and its engine's state."""

    app: FastAPI
    served: list[tuple[str, str]] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)


def _memory_routes(served: list[tuple[str, str]]) -> APIRouter:
    """Nerve's memory routes: files, the memU store's read and its four edits."""
    router = APIRouter()
    user = _USER

    def mark(request: Request) -> None:
        served.append((request.method, request.url.path))

    @router.get("/api/memory/files")
    async def list_files(_: dict[str, str] = user) -> list[dict[str, str]]:
        return [{"path": "MEMORY.md"}]

    @router.get("/api/memory/file/{file_path:path}")
    async def read_file(file_path: str, _: dict[str, str] = user) -> dict[str, str]:
        return {"path": file_path, "content": "# Memory\n"}

    @router.put("/api/memory/file/{file_path:path}")
    async def write_file(file_path: str, body: _FileWrite, _: dict[str, str] = user) -> Any:
        return {"path": file_path, "written": True}

    @router.get("/api/memory/memu")
    async def memu_data(request: Request, _: dict[str, str] = user) -> dict[str, Any]:
        mark(request)
        return {"available": True, "categories": [], "items": []}

    @router.post("/api/memory/memu/categories")
    async def create_category(
        request: Request, body: _CategoryCreate, _: dict[str, str] = user
    ) -> dict[str, Any]:
        mark(request)
        return {"name": body.name, "created": True}

    @router.patch("/api/memory/memu/items/{item_id}")
    async def update_item(
        request: Request, item_id: str, body: _ItemUpdate, _: dict[str, str] = user
    ) -> dict[str, Any]:
        mark(request)
        return {"id": item_id, "updated": True}

    @router.delete("/api/memory/memu/items/{item_id}")
    async def delete_item(request: Request, item_id: str, _: dict[str, str] = user) -> Any:
        mark(request)
        return {"id": item_id, "deleted": True}

    @router.patch("/api/memory/memu/categories/{category_id}")
    async def update_category(
        request: Request, category_id: str, body: _CategoryUpdate, _: dict[str, str] = user
    ) -> dict[str, Any]:
        mark(request)
        return {"id": category_id, "updated": True}

    @router.get("/api/memory/memu/audit")
    async def audit(request: Request, limit: int = 100, _: dict[str, str] = user) -> Any:
        mark(request)
        return {"logs": [], "limit": limit}

    @router.get("/api/memory/memu/health")
    async def health(request: Request, _: dict[str, str] = user) -> dict[str, bool]:
        mark(request)
        return {"service_available": True}

    return router


def _diagnostics_routes() -> APIRouter:
    router = APIRouter()

    @router.get("/api/diagnostics")
    async def diagnostics(_: dict[str, str] = _USER) -> dict[str, Any]:
        return {"engine": "running"}

    return router


def nerve_shaped_app(
    *,
    before_nerve: Sequence[APIRouter] = (),
    after_nerve: Sequence[APIRouter] = (),
    engine: dict[str, Any] | None = None,
) -> NerveShaped:
    """The app, with ``before_nerve`` included before Nerve's REST routes, ``after_nerve`` after.

    Its lifespan sets ``engine["memory"]`` only once the app starts and clears it when the app
    stops, as Nerve's lifespan builds its engine after the routes exist; what it sets is
    ``engine["memory_at_start"]`` (None when unset).
    """
    engine = {} if engine is None else engine

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine["memory"] = engine.get("memory_at_start")
        yield
        engine["memory"] = None

    app = FastAPI(title="Nerve-shaped", lifespan=lifespan)
    shaped = NerveShaped(app=app, engine=engine)
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"])
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    for router in before_nerve:
        app.include_router(router)
    nerve = APIRouter()
    nerve.include_router(_memory_routes(shaped.served))
    nerve.include_router(_diagnostics_routes())
    app.include_router(nerve)
    for router in after_nerve:
        app.include_router(router)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/{path:path}")
    async def spa_fallback(path: str) -> HTMLResponse:
        return HTMLResponse(SPA_HTML)

    return shaped
