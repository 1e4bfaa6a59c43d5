"""The real peer: the official ``mcp`` SDK server behind a small catalog app.

The SDK serves stateless streamable HTTP at ``/s/loom/mcp``, either with JSON answers or with
event streams; ``/catalog`` lists it as ``loom``. Its tools stand in for Loom's, shaped like
the answers of contracts/loom-ops.md:

* ``loom_search`` answers ``structuredContent``;
* ``loom_context_pack`` sends progress notifications before its result (seen in stream mode);
* ``loom_namespace_summary`` answers JSON as text only, no ``structuredContent``;
* ``loom_memory_get`` raises, which the SDK answers as a result with ``isError: true``.

Every request's headers and client port are kept (``PeerApp.seen_headers``,
``seen_client_ports``) so tests can check what the client sent, and over which connection.
Run as a script (``python sdk_peer.py [--sse]``) it serves on a free port and prints the base
URL, for the benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

MCP_PATH = "/s/loom/mcp"
PROGRESS_STEPS = 3


def build_mcp_server() -> MCPServer:
    server = MCPServer("loom")

    @server.tool(name="loom_search", structured_output=True)
    async def search(query: str, top_k: int = 5) -> dict[str, Any]:
        results = [
            {"memory_key": f"k{n}", "content_excerpt": f"{query} #{n}"} for n in range(top_k)
        ]
        return {"results": results, "abstained": False}

    @server.tool(name="loom_context_pack", structured_output=True)
    async def context_pack(mode: str, sections: list[str], ctx: Context) -> dict[str, Any]:
        for step in range(PROGRESS_STEPS):
            await ctx.session.send_progress_notification(
                "pack", step, PROGRESS_STEPS, "packing", related_request_id=ctx.request_id
            )
        items = [{"memory_key": "m1", "text": "likes &lt;tea&gt;"}]
        return {"mode": mode, "sections": {name: {"items": items} for name in sections}}

    @server.tool(name="loom_namespace_summary", structured_output=False)
    async def namespace_summary() -> str:
        return json.dumps({"org": "acme", "namespace": "agent-7", "memory_count": 3})

    @server.tool(name="loom_memory_get")
    async def memory_get(memory_key: str) -> str:
        raise ValueError(f"no memory {memory_key}")

    return server


class PeerApp:
    """The catalog app with the SDK mounted; records each request's headers."""

    def __init__(self, *, json_response: bool) -> None:
        self.seen_headers: list[dict[str, str]] = []
        self.seen_client_ports: list[int] = []
        mcp_server = build_mcp_server()
        mcp_app = mcp_server.streamable_http_app(
            streamable_http_path=MCP_PATH, json_response=json_response, stateless_http=True
        )

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> Any:
            async with mcp_server.session_manager.run():
                yield

        self._app = Starlette(
            routes=[Route("/catalog", self._catalog), Mount("/", app=mcp_app)], lifespan=lifespan
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            self.seen_headers.append(headers)
            self.seen_client_ports.append(scope["client"][1])
        await self._app(scope, receive, send)

    async def _catalog(self, request: Request) -> JSONResponse:
        tools = sorted(["loom_search", "loom_context_pack", "loom_namespace_summary"])
        return JSONResponse(
            {
                "schemaVersion": 1,
                "generation": 1,
                "digest": "sha256:" + "0" * 64,
                "servers": [
                    {"id": "loom", "path": MCP_PATH, "tools": tools, "displayName": "Loom"}
                ],
            }
        )


def main() -> None:
    import logging

    import uvicorn

    logging.getLogger("mcp").setLevel(logging.WARNING)  # the SDK logs every request at INFO
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sse", action="store_true", help="answer with event streams")
    args = parser.parse_args()
    config = uvicorn.Config(
        PeerApp(json_response=not args.sse), host="127.0.0.1", port=0, log_level="critical"
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}", flush=True)
        await task

    asyncio.run(serve())
    sys.exit(0)


if __name__ == "__main__":
    main()
