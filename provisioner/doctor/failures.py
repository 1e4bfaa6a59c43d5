"""What a kept failure means, in words, for doctor and ``nerve-provisioner memory status``.

The runtime keeps the last error as its outcome class (``MayPass``, ``CodedFault``, …; the
tree is in ``provisioner.runtime.gateway.errors``), a fault code and a one-line message. A
class name tells a person or a monitor nothing, so the text and the ``what`` field say what
happened instead (FLEET-4): the HTTP status the gateway answered, when it said to try again
(``Retry-After``), and Loom's fault codes as words ("Loom overloaded"). The class name stays
in the JSON's ``kind`` for whoever already reads it.

Only kept text is read here (the class name, the code, the message the runtime bounded), so
an error kept by another process, or by an older version, reads the same way. A kind this
module does not know is shown as it was kept.
"""

from __future__ import annotations

import re

# GW-5: the outcome classes of a gateway call, and the memory contract's failure, in words.
OUTCOME_WORDS = {
    "MayPass": "the gateway said to try again later",
    "CodedFault": "Loom could not do it now",
    "InternalFault": "Loom failed with an internal error",
    "GatewayCallTimeout": "the gateway gave up waiting for Loom",
    "BodyTooLarge": "the request was too large for the gateway (HTTP 413)",
    "NoAnswer": "no answer came in time",
    "GatewayUnreachable": "the gateway was not reached",
    "BrokenAnswer": "the answer broke the gateway's contract",
    "PolicyRefused": "the gateway's policy refused the call",
    "ToolRefused": "the tool refused the call",
    "CircuitOpen": "nothing was sent: too many failures in a row, so calls wait a moment",
    "ClientClosed": "the call was cut off because the process was closing",
    "CatalogError": "the gateway's catalog could not be read",
    "ServerNotListed": "the gateway's catalog does not list Loom",
    "MemoryBackendUnavailable": "memory was unavailable",
}
# loom-ops "Faults": Loom's codes for a fault that is about Loom, not the request.
FAULT_CODE_WORDS = {
    "OVERLOADED": "Loom overloaded",
    "BACKEND_UNAVAILABLE": "Loom's database unreachable",
    "GRANT_BUSY": "Loom busy with this agent's earlier calls",
}
# gateway.md: the statuses a may-pass answer comes with.
MAY_PASS_STATUS_WORDS = {
    429: "the gateway's rate limit",
    502: "the gateway could not reach Loom",
    503: "Loom or the gateway unavailable for now",
}
_HTTP_STATUS = re.compile(r"\bHTTP (?P<status>[1-5]\d\d)\b")


def failure_words(
    kind: object, code: object = None, message: object = "", retry_after_s: object = None
) -> str:
    """What a kept failure of class ``kind`` means, without its code (the caller shows it).

    ``message`` is read only for the HTTP status a may-pass answer names; ``retry_after_s``
    is the gateway's ``Retry-After`` when it is known (seconds). An unknown ``kind`` comes back
    as it is, so nothing kept is ever hidden.
    """
    name = str(kind)
    if name == "CodedFault" and isinstance(code, str) and code in FAULT_CODE_WORDS:
        words = FAULT_CODE_WORDS[code]
    elif name == "MayPass":
        words = _may_pass_words(str(message))
    else:
        words = OUTCOME_WORDS.get(name, name)
    if isinstance(retry_after_s, int | float) and not isinstance(retry_after_s, bool):
        words += f"; Retry-After {retry_after_s:g} s"
    return words


def _may_pass_words(message: str) -> str:
    match = _HTTP_STATUS.search(message)
    if match is None:
        return f"{OUTCOME_WORDS['MayPass']} (JSON-RPC -32002)"
    status = int(match["status"])
    said = MAY_PASS_STATUS_WORDS.get(status, OUTCOME_WORDS["MayPass"])
    return f"{said} (HTTP {status})"
