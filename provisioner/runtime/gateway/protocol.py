"""Sorting what the gateway answered into a ``ToolResult`` or one outcome exception (GW-5).

Pure functions, no I/O: the tool client hands over the HTTP status and the decoded JSON-RPC
message, and gets back a result or the one exception that names what happened (the tree is
in ``provisioner.runtime.gateway.errors``). The order of the checks is the contract's table:

1. HTTP status: 413 → ``BodyTooLarge``; 429, 502, 503 → ``MayPass``; 504 →
   ``GatewayCallTimeout``. Any other status than 200 is read for a JSON-RPC error and
   otherwise is a ``BrokenAnswer``.
2. A JSON-RPC error: the message "MCP server timed out" → ``GatewayCallTimeout`` whatever
   its code; -32001 → ``PolicyRefused``; -32002 → ``MayPass``; -32000 → ``CodedFault``
   (``code`` from ``error.data.code``) or ``InternalFault`` (no code); -32601, -32602 and
   any other code → ``BrokenAnswer``.
3. A result: ``isError: true`` → ``ToolRefused``; otherwise a ``ToolResult``.

The answer is held to the letter of JSON-RPC and MCP, since a gateway may answer anything: its
``id`` is the integer sent (not ``1.0``, not ``true``; an error may carry ``null`` when the
request could not be read), it has ``result`` or ``error`` but not both, and a result has a
``content`` list of objects. Anything else is a ``BrokenAnswer``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    BrokenAnswer,
    CodedFault,
    GatewayCallTimeout,
    GatewayError,
    InternalFault,
    MayPass,
    PolicyRefused,
    ToolRefused,
)
from provisioner.runtime.gateway.wire import NotJson, decode_json

POLICY_REFUSED_CODE = -32001  # GW-5 (contracts/gateway.md)
MAY_PASS_CODE = -32002  # GW-5
SERVER_FAULT_CODE = -32000  # GW-5
CONTRACT_ERROR_CODES = frozenset({-32601, -32602})  # GW-5: unknown method, bad arguments
GATEWAY_CALL_TIMEOUT_MESSAGE = "MCP server timed out"  # GW-5: the gateway's call limit
BODY_TOO_LARGE_STATUS = 413  # GW-5
MAY_PASS_STATUSES = frozenset({429, 502, 503})  # GW-5
GATEWAY_TIMEOUT_STATUS = 504  # GW-5
FAULT_CODE_MAX_CHARS = 128  # our choice: a fault code is a short word

JSONRPC_VERSION = "2.0"


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer.

    ``data`` is the result's ``structuredContent`` when present, else the first text block
    parsed as JSON, else None (a tool that answered plain text). ``text`` is the first text
    block, or ``""`` when there is none.
    """

    data: Any
    text: str


def error_for_status(status: int, *, retry_after_s: float | None) -> GatewayError | None:
    """The outcome an HTTP status alone decides, or None to read the body."""
    if status == BODY_TOO_LARGE_STATUS:
        return BodyTooLarge("the gateway refused the request body as too large (HTTP 413)")
    if status in MAY_PASS_STATUSES:
        return MayPass(f"the gateway answered HTTP {status}", retry_after_s=retry_after_s)
    if status == GATEWAY_TIMEOUT_STATUS:
        return GatewayCallTimeout("the gateway gave up on the upstream call (HTTP 504)")
    return None


def outcome_of_message(
    message: Any, request_id: int, *, retry_after_s: float | None = None
) -> ToolResult:
    """The ``ToolResult`` in a JSON-RPC response to ``request_id``, or the exception it means.

    ``retry_after_s`` is the answer's ``Retry-After``, passed on to a -32002 ``MayPass``.
    """
    return tool_result(result_of_message(message, request_id, retry_after_s=retry_after_s))


def result_of_message(message: Any, request_id: int, *, retry_after_s: float | None = None) -> Any:
    """The ``result`` of a JSON-RPC response to ``request_id``, as sent, for any method; the
    exception an error means, as ``outcome_of_message`` raises it."""
    if not isinstance(message, dict) or message.get("jsonrpc") != JSONRPC_VERSION:
        raise BrokenAnswer("the answer is not a JSON-RPC 2.0 message")
    if "error" in message:
        raise error_of_response(message, request_id, retry_after_s=retry_after_s)
    if not _is_id(message.get("id"), request_id):
        raise BrokenAnswer("the answer is for another request id")
    if "result" not in message:
        raise BrokenAnswer("the answer has neither a result nor an error")
    return message["result"]


def error_of_response(
    message: dict[str, Any], request_id: int, *, retry_after_s: float | None = None
) -> GatewayError:
    """The outcome of a JSON-RPC error response to ``request_id`` (any HTTP status).

    An error for another request, or one that also carries a ``result``, is a ``BrokenAnswer``.
    """
    if "result" in message:
        return BrokenAnswer("the answer carries both a result and an error")
    request = message.get("id")
    if request is not None and not _is_id(request, request_id):
        return BrokenAnswer("the error answers another request id")
    return error_for_rpc_error(message["error"], retry_after_s=retry_after_s)


def _is_id(value: Any, request_id: int) -> bool:
    """Exactly the integer ``request_id``: JSON's ``1.0`` and ``true`` are other values."""
    return type(value) is int and value == request_id


def is_rpc_error(message: Any) -> bool:
    """Whether ``message`` looks like a JSON-RPC error response (for non-200 bodies)."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == JSONRPC_VERSION
        and isinstance(message.get("error"), dict)
    )


def error_for_rpc_error(error: Any, *, retry_after_s: float | None = None) -> GatewayError:
    """The outcome exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return BrokenAnswer("the JSON-RPC error is not an object")
    code, text = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(text, str):
        return BrokenAnswer("the JSON-RPC error has no integer code or no message")
    if text.strip() == GATEWAY_CALL_TIMEOUT_MESSAGE:
        return GatewayCallTimeout(f"the gateway's call limit passed: {text}")
    if code == POLICY_REFUSED_CODE:
        return PolicyRefused(text)
    if code == MAY_PASS_CODE:
        return MayPass(text, retry_after_s=retry_after_s)
    if code == SERVER_FAULT_CODE:
        fault_code = _fault_code(error.get("data"))
        if fault_code is None:
            return InternalFault(text)
        return CodedFault(text, code=fault_code)
    if code in CONTRACT_ERROR_CODES:
        return BrokenAnswer(f"the call broke the contract (JSON-RPC {code}): {text}")
    return BrokenAnswer(f"unexpected JSON-RPC error {code}: {text}")


def _fault_code(data: Any) -> str | None:
    """Loom's ``error.data.code``: a non-empty short string, else None (an uncoded fault)."""
    if not isinstance(data, dict):
        return None
    code = data.get("code")
    if isinstance(code, str) and 0 < len(code) <= FAULT_CODE_MAX_CHARS and code.isprintable():
        return code
    return None


def tool_result(result: Any) -> ToolResult:
    """A ``ToolResult`` from a ``tools/call`` result; ``ToolRefused`` when ``isError`` is true."""
    if not isinstance(result, dict):
        raise BrokenAnswer("the result is not an object")
    content = result.get("content")
    is_error = result.get("isError", False)
    structured = result.get("structuredContent")
    if not isinstance(content, list) or not isinstance(is_error, bool):
        raise BrokenAnswer("the result has no content list, or isError is not a boolean")
    if not all(isinstance(block, dict) for block in content):
        raise BrokenAnswer("the result's content holds a block that is not an object")
    if structured is not None and not isinstance(structured, dict):
        raise BrokenAnswer("the result's structuredContent is not an object")
    texts = [block["text"] for block in content if _is_text_block(block)]
    if is_error:
        raise ToolRefused(" ".join(texts))
    first = texts[0] if texts else ""
    data = structured if structured is not None else _json_or_none(first)
    return ToolResult(data=data, text=first)


def listed_tools(result: Any) -> list[dict[str, Any]]:
    """The tools of a ``tools/list`` result, each ``{"name", "inputSchema", …}`` as sent;
    ``BrokenAnswer`` for a result without a list of named tools with schema objects."""
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list) or not all(_is_listed_tool(tool) for tool in tools):
        raise BrokenAnswer("the tools/list result has no list of named tools with schemas")
    return tools


def _is_listed_tool(tool: Any) -> bool:
    return (
        isinstance(tool, dict)
        and isinstance(tool.get("name"), str)
        and isinstance(tool.get("inputSchema"), dict)
    )


def _is_text_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _json_or_none(text: str) -> Any:
    if not text:
        return None
    try:
        return decode_json(text)
    except NotJson:
        return None
