"""Loom's tools on the official ``mcp`` SDK: the stand-in's MCP server.

Built on the SDK's low-level ``Server``, so the handler sees the arguments exactly as sent and
can answer what Loom answers: a result with ``structuredContent`` and the same JSON as text,
-32602 for arguments the op's schema refuses (through ``loom_op``: also an op it does not
serve), -32601 for a tool Loom does not serve here.
The same server is served twice, once answering JSON bodies and once event streams, both
stateless streamable HTTP at ``/s/loom/mcp``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette

from provisioner.devgateway.contract import LoomOpTool, ServedTool
from provisioner.devgateway.store import LoomStandIn, QueueState

MCP_PATH = "/s/loom/mcp"
INVALID_PARAMS = -32602  # JSON-RPC: the arguments break the op's params schema
METHOD_NOT_FOUND = -32601  # JSON-RPC: no such tool here
LOOM_FAULT = -32000  # loom-ops.md: a failed op


def build_loom_server(
    store: LoomStandIn,
    tools: Mapping[str, ServedTool | LoomOpTool],
    *,
    forced: QueueState | None = None,
) -> Server[Any]:
    """A low-level SDK server whose ``tools/call`` answers from ``store``; ``forced`` may
    force the state of each pending batch a status call names (the ``queue`` fault)."""

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(code=METHOD_NOT_FOUND, message=f"unknown tool {params.name}")
        try:
            op, arguments = tool.resolve(params.arguments or {})
        except ValueError as problem:
            raise MCPError(code=INVALID_PARAMS, message=f"{tool.name}: {problem}") from None
        try:
            answer = store.answer(op, arguments, forced=forced)
        except Exception as error:  # the stand-in's own failure is Loom's internal error
            raise MCPError(
                code=LOOM_FAULT, message=f"internal error: {type(error).__name__}"
            ) from None
        text = json.dumps(answer, ensure_ascii=False)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=answer
        )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool.name, input_schema=tool.params_schema)
                for tool in sorted(tools.values(), key=lambda tool: tool.name)
            ]
        )

    return Server("loom", on_call_tool=call_tool, on_list_tools=list_tools)


def loom_http_app(server: Server[Any], *, json_response: bool) -> Starlette:
    """``server`` as stateless streamable HTTP at ``MCP_PATH``, answering JSON or streams."""
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH, json_response=json_response, stateless_http=True
    )
