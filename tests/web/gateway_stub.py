"""Loopback stand-ins for the gateway that doctor and the Memory page tests talk to.

``CatalogApp`` serves ``GET /catalog`` (whatever catalog a test sets) and counts requests.
``CountingListener`` accepts TCP connections, counts them and answers nothing: a gateway
that is up but stuck, and a way to prove that no connection was attempted at all.
Both bind 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

LOOM_TOOLS = [
    "loom_context_pack",
    "loom_memory_get",
    "loom_memory_set",
    "loom_memory_set_from_messages",
    "loom_namespace_summary",
    "loom_namespace_validate",
    "loom_search",
]


def catalog_payload(servers: list[dict[str, Any]], generation: int = 7) -> dict[str, Any]:
    """A schema-1 catalog listing ``servers`` (sorted by id, as the contract asks)."""
    ordered = sorted(servers, key=lambda server: server["id"])
    digest = hashlib.sha256(json.dumps(ordered).encode()).hexdigest()
    return {
        "schemaVersion": 1,
        "generation": generation,
        "digest": f"sha256:{digest}",
        "servers": ordered,
    }


def loom_server(tools: list[str] | None = None) -> dict[str, Any]:
    return {"id": "loom", "path": "/s/loom/mcp", "tools": sorted(tools or LOOM_TOOLS)}


class CatalogApp:
    """An ASGI app serving one catalog; ``payload`` may be changed between requests."""

    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload
        self.requests = 0
        self.base_url = ""  # set by whoever starts the server
        self.app = Starlette(routes=[Route("/catalog", self._catalog)])

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    async def _catalog(self, request: Request) -> Response:
        self.requests += 1
        return JSONResponse(self.payload)


class CountingListener:
    """A TCP listener on 127.0.0.1 that counts connections and never answers."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._socket.settimeout(0.05)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._count = 0
        self._thread = threading.Thread(target=self._accept, name="counting-listener", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    @property
    def connections(self) -> int:
        with self._lock:
            return self._count

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for held in self._held:
            held.close()
        self._socket.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _address = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._count += 1
            self._held.append(connection)  # held open, never answered


class RefusingGatewayApp:
    """A gateway whose catalog lists loom and whose every tool call is a policy refusal.

    The refusal's message is whatever the test sets: the gateway contract calls it safe to
    show, so it travels through the runtime into diagnostics — which is how a hostile text
    reaches the Memory page.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        self.base_url = ""
        self.app = Starlette(
            routes=[
                Route("/catalog", self._catalog),
                Route("/s/loom/mcp", self._call, methods=["POST"]),
            ]
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    async def _catalog(self, request: Request) -> Response:
        return JSONResponse(catalog_payload([loom_server()]))

    async def _call(self, request: Request) -> Response:
        body = await request.json()
        error = {"code": -32001, "message": self.message}
        return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error})
