"""Every way a gateway call can fail, as one hierarchy (GW-5).

A call either returns a ``ToolResult`` or raises exactly one of these. The intermediate bases
(in brackets) group the outcomes by what the caller does next, so callers branch on a group,
never on a list of classes. The tree, with when each happens and what the caller should do::

    GatewayError               base class: catch it to treat any failure as "memory unavailable"
    │                          (it is a ``provisioner.runtime.errors.MemoryUnavailable``).
    ├── [NotNow]               a condition about the gateway or Loom, not about the request:
    │   │                      stop for now, keep every watermark, count nothing against it.
    │   ├── MayPass            JSON-RPC -32002, HTTP 429/502/503: upstream unavailable, a limit,
    │   │                      the gateway's open circuit. ``retry_after_s`` says when, if said.
    │   ├── CodedFault         JSON-RPC -32000 with Loom's ``error.data.code`` in ``code``
    │   │                      (``BACKEND_UNAVAILABLE``, ``GRANT_BUSY``, ``OVERLOADED``, …).
    │   ├── GatewayCallTimeout HTTP 504, or "MCP server timed out": the gateway gave up on the
    │   │                      upstream call, which may still finish. Also [RequestTooBig].
    │   ├── CircuitOpen        this client's own breaker is open (GW-7): nothing was sent. Try
    │   │                      again after ``retry_in_s``.
    │   └── ClientClosed       the client was closed (shutdown) while the call was under way;
    │                          whether the op ran upstream is unknown.
    ├── [RequestTooBig]        the request was more than the gateway takes: send less next time.
    │   ├── BodyTooLarge       HTTP 413: the request body is too large for the gateway.
    │   └── GatewayCallTimeout (the same class as above: the call took longer than its limit)
    ├── [CountsForBreaker]     the gateway was not reached or did not answer in time; the breaker
    │   │                      counts these, and a sweep ends at once.
    │   ├── NoAnswer           no complete answer within the caller's deadline; whether the op
    │   │                      ran upstream is unknown.
    │   └── GatewayUnreachable connection refused, DNS failure, connect timeout: nothing went
    │                          upstream.
    ├── [ContractBroken]       one side broke the wire contract: a bug to report, never retried
    │   │                      (also an ``OperatorMustAct``).
    │   └── BrokenAnswer       bad JSON, a wrong shape, an unexpected status or content type, a
    │                          stream cut before its answer, -32601/-32602.
    ├── ServerFault            JSON-RPC -32000: the server failed the op; base of CodedFault
    │   │                      (above) and of:
    │   └── InternalFault      an uncoded -32000 (Loom's internal error): the only fault that can
    │                          be about the request itself, such as one message Loom cannot take.
    ├── PolicyRefused          JSON-RPC -32001: the gateway's policy refused the call (no
    │                          credential set yet, tool not allowed). The message is safe to
    │                          show; do not retry soon. The client is kept. Also an
    │                          ``OperatorMustAct``: a person changes the policy.
    ├── ToolRefused            a result with ``isError: true``: the tool ran and refused, and
    │                          ``text`` says why. Do not retry the same call.
    └── CatalogError           the catalog could not be read or broke the contract (``reason``);
        │                      the last good catalog stays in use (GW-2).
        └── ServerNotListed    the catalog was read but lists no such server (no ``loom`` yet):
                               memory cannot be used in this session.

Messages are bounded and stripped of control characters, so any of them may go into a log line
or into diagnostics; response bodies never do. Where a lower-level exception caused an outcome
(an httpx error, a decoding error), it is the outcome's ``__cause__``.

Nothing else escapes a call: whatever the gateway sends, a call raises one of these (a caller's
own mistakes — a non-positive deadline, arguments JSON cannot carry, a call on a closed client —
raise ``ValueError``, ``TypeError`` or ``RuntimeError`` before anything is sent).
"""

from __future__ import annotations

import re

from provisioner.runtime.errors import MemoryUnavailable, OperatorMustAct

MESSAGE_MAX_CHARS = 300  # our choice: keeps log lines and diagnostics bounded

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def bounded_message(text: str) -> str:
    """``text`` made safe for one log line: control characters become spaces, length is capped."""
    flat = _CONTROL.sub(" ", text).strip()
    if len(flat) > MESSAGE_MAX_CHARS:
        return flat[: MESSAGE_MAX_CHARS - 1] + "…"
    return flat


class GatewayError(MemoryUnavailable):
    """Base class of every gateway failure; ``message`` is bounded and safe to log."""

    def __init__(self, message: str) -> None:
        self.message = bounded_message(message)
        super().__init__(self.message)


class NotNow(GatewayError):
    """Group: a condition about the gateway or Loom that may pass; stop now and try later."""


class RequestTooBig(GatewayError):
    """Group: the request was more than the gateway takes (its body or its time); send less."""


class CountsForBreaker(GatewayError):
    """Group: the gateway was not reached or gave no answer in time; the breaker counts it."""


class ContractBroken(GatewayError, OperatorMustAct):
    """Group: an answer or a call broke the wire contract; a bug on one side, never retried."""


class PolicyRefused(GatewayError, OperatorMustAct):
    """The gateway's policy refused the call (-32001); the message is safe to show a human."""


class MayPass(NotNow):
    """A condition that may pass (-32002, HTTP 429/502/503); retry later.

    ``retry_after_s`` is the gateway's ``Retry-After`` in seconds, or None when it sent none.
    """

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ServerFault(GatewayError):
    """The server failed the op (-32000); raised as ``CodedFault`` or ``InternalFault``.

    ``code`` is the server's fault code (Loom's ``error.data.code``, such as
    ``BACKEND_UNAVAILABLE``), or None for an uncoded internal error.
    """

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class CodedFault(ServerFault, NotNow):
    """A -32000 fault with Loom's ``error.data.code``: about Loom, not the request ("not now")."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message, code=code)


class InternalFault(ServerFault):
    """An uncoded -32000 fault: Loom's internal error, which may be caused by the request."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=None)


class GatewayCallTimeout(NotNow, RequestTooBig):
    """The gateway gave up on the upstream call (504, "MCP server timed out"); it may finish."""


class BodyTooLarge(RequestTooBig):
    """The gateway refused the request body as too large (413)."""


class NoAnswer(CountsForBreaker):
    """No complete answer came within the caller's deadline (``deadline_s``)."""

    def __init__(self, message: str, *, deadline_s: float | None = None) -> None:
        super().__init__(message)
        self.deadline_s = deadline_s


class GatewayUnreachable(CountsForBreaker):
    """The gateway was not reached (refused, DNS, connect timeout); nothing went upstream."""


class BrokenAnswer(ContractBroken):
    """The answer broke the contract (bad JSON, wrong shape, cut stream, -32601/-32602)."""


class ToolRefused(GatewayError):
    """The tool answered with ``isError: true``; ``text`` is what it said, bounded."""

    def __init__(self, text: str) -> None:
        super().__init__(text or "the tool refused without saying why")
        self.text = self.message


class CircuitOpen(NotNow):
    """This client's breaker is open; nothing was sent. ``retry_in_s`` is when it lets a call by."""

    def __init__(self, message: str, *, retry_in_s: float) -> None:
        super().__init__(message)
        self.retry_in_s = retry_in_s


class ClientClosed(NotNow):
    """The client was closed while this call was under way; nothing more is sent for it."""


class CatalogError(GatewayError):
    """The catalog could not be read or was rejected; the last good one stays (GW-2).

    ``reason`` is a short stable word (``unreachable``, ``timeout``, ``http_503``,
    ``too_large``, ``not_json``, ``invalid``, ``not_read``, ``not_listed``). When the gateway
    sent an error envelope, ``gateway_reason`` and ``request_id`` carry its values, but only
    when they have the documented shapes.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        gateway_reason: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.gateway_reason = gateway_reason
        self.request_id = request_id


class ServerNotListed(CatalogError):
    """The catalog lists no server with the id asked for (or only Nerve's own ``nerve``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="not_listed")


OUTCOME_ERRORS: tuple[type[GatewayError], ...] = (
    PolicyRefused,
    MayPass,
    CodedFault,
    InternalFault,
    GatewayCallTimeout,
    BodyTooLarge,
    NoAnswer,
    GatewayUnreachable,
    BrokenAnswer,
    ToolRefused,
    CircuitOpen,
    ClientClosed,
    CatalogError,
    ServerNotListed,
)
"""Every concrete failure class (what a call can raise), in the order of the tree above."""

OUTCOME_GROUPS: tuple[type[GatewayError], ...] = (
    NotNow,
    RequestTooBig,
    CountsForBreaker,
    ContractBroken,
)
"""The intermediate bases a caller branches on."""
