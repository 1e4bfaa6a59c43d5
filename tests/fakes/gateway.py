"""One stand-in for the MCP gateway on the wire, for the tests that need the gateway's answers
and not its faults (``tests/runtime/gateway/fault_gateway.py`` plays those).

``FakeGateway`` is an ASGI app a test serves on loopback (``tests.support.loopback``). It
answers ``GET /catalog`` with ``catalog`` (which a test may change between requests; each
request is counted), and every ``tools/call`` with what the test configured, first match:

- ``refusal``: a policy refusal (-32001) whose message is this text — the gateway contract
  calls it safe to show, so it travels through the runtime into diagnostics;
- ``raw_answer``: this prebuilt ``(content type, body)``, whatever was asked (the request is
  not parsed, so a test of a large answer spends nothing but the answer);
- ``answers[tool]``: a result whose structured content is this value, with its JSON as the
  text block.

``catalog_everywhere`` answers the catalog on every path, as a gateway would that knows no
server the client asks for. Requests are recorded in ``calls``, one JSON body each.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import read_request_body

LOOM_TOOLS = [
    "loom_context_pack",
    "loom_memory_get",
    "loom_memory_set",
    "loom_memory_set_from_messages",
    "loom_namespace_summary",
    "loom_namespace_validate",
    "loom_search",
]
POLICY_REFUSED = -32001  # the gateway contract's code for a call its policy refuses


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


def rpc_result(result: dict[str, Any], request_id: int = 1) -> bytes:
    """A JSON-RPC answer carrying ``result`` (not an error), as compact JSON."""
    message = {"jsonrpc": "2.0", "id": request_id, "result": {**result, "isError": False}}
    return json.dumps(message, separators=(",", ":")).encode()


@dataclass
class FakeGateway:
    catalog: dict[str, Any] = field(default_factory=lambda: catalog_payload([loom_server()]))
    catalog_everywhere: bool = False
    answers: dict[str, Any] = field(default_factory=dict)
    refusal: str | None = None
    raw_answer: tuple[str, bytes] | None = None
    base_url: str = ""  # set by whoever starts the server
    catalog_requests: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await read_request_body(receive)
        if scope["path"] == "/catalog" or self.catalog_everywhere:
            self.catalog_requests += 1
            await _send(send, "application/json", json.dumps(self.catalog).encode())
            return
        if self.raw_answer is not None:
            await _send(send, *self.raw_answer)
            return
        request = json.loads(body)
        self.calls.append(request)
        if self.refusal is not None:
            error = {"code": POLICY_REFUSED, "message": self.refusal}
            answer = {"jsonrpc": "2.0", "id": request.get("id"), "error": error}
            await _send(send, "application/json", json.dumps(answer).encode())
            return
        structured = self.answers[request["params"]["name"]]
        result = {
            "content": [{"type": "text", "text": json.dumps(structured)}],
            "structuredContent": structured,
        }
        await _send(send, "application/json", rpc_result(result, request["id"]))


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _send(send: Any, kind: str, body: bytes) -> None:
    headers = [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
