"""The last error the Loom backend met, as diagnostics show it (LOOM-4).

Either side may meet an error — the backend on a recall or a health probe, the sweep on an
extraction — and diagnostics show the most recent one: when, which op, which outcome class,
and its one-line message. Never any message text: an error whose message quotes text that
was sent (a Loom fault that echoes a transcript line, say) is shown without its message.

Nothing here raises on what it is handed: a sent "text" that is None or no string (Nerve keeps
NULL content), an error whose ``str()`` raises, a clock that answers no number — this is the
error path, and a failure in it would hide the error it reports (SWEEP-12).

A kept error names its outcome class (``MayPass``, ``CodedFault``, …; the tree is in
``provisioner.runtime.gateway.errors``). A class name tells a person or a monitor nothing, so
``failure_words`` says what happened instead, for status, doctor and the Memory page (FLEET-4):
the HTTP status the gateway answered, when it said to try again (``Retry-After``), and Loom's
fault codes as words ("Loom overloaded"). It reads only kept text (the class name, the code,
the bounded message), so an error kept by another process, or by an older version, reads the
same way; a kind it does not know is shown as it was kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from provisioner.runtime.gateway.errors import GatewayError, ServerFault, bounded_message

QUOTE_WINDOW_CHARS = 24  # our choice: a shared run this long means the message quotes a text
QUOTE_MIN_CHARS = 6  # our choice: a whole text shorter than this is too common to look for
WITHHELD = "(message withheld: it quotes text that was sent)"
CODE_MAX_CHARS = 128  # our choice: as long a fault code as a report shows (outcomes.error_kind)
# REL-7: the ops of the sweep's own calls (the backend's extraction, queue.STATUS_OP and
# queue.RETRY_OP): doctor's sweep line shows only their errors, never a status probe's.
SWEEP_OPS = frozenset({"extract", "queue-status", "queue-retry"})


@dataclass(frozen=True)
class LastError:
    """One error: wall time (seconds since the epoch), op, outcome class, one-line message."""

    at: float
    op: str
    kind: str
    message: str
    code: str | None = None  # a coded fault's code; kept, and shown by status as "kind (code)"

    def as_dict(self) -> dict[str, Any]:
        """The error as diagnostics show it; ``at`` is None when the clock gave no time."""
        try:
            at: str | None = datetime.fromtimestamp(self.at, UTC).isoformat(timespec="seconds")
        except (TypeError, ValueError, OverflowError, OSError):
            at = None
        return {
            "at": at,
            "op": self.op,
            "kind": self.kind,
            "message": self.message,
        }


class ErrorRecord:
    """Keeps the most recent error; ``wall_clock`` gives seconds since the epoch."""

    def __init__(self, wall_clock: Callable[[], float]) -> None:
        self._wall_clock = wall_clock
        self.last: LastError | None = None

    def note(
        self, op: str, error: BaseException, *, sent_texts: Iterable[object] = ()
    ) -> LastError:
        """Record ``error`` met during ``op``; ``sent_texts`` are texts it must not quote.

        Sent bytes are read as UTF-8; None and other values that are no text quote nothing.
        An error whose message cannot be read is named by its class.
        """
        kind = type(error).__name__
        message = bounded_message(_error_text(error)) or kind
        if quotes_any(message, sent_texts):
            message = WITHHELD
        self.last = LastError(self._wall_clock(), str(op), kind, message, fault_code(error))
        return self.last


def fault_code(error: BaseException) -> str | None:
    """A coded fault's code as it may be kept and shown: printable, at most
    ``CODE_MAX_CHARS``; None for any other error, or a code that is not such text."""
    code = error.code if isinstance(error, ServerFault) else None
    if isinstance(code, str) and 0 < len(code) <= CODE_MAX_CHARS and code.isprintable():
        return code
    return None


def quotes_any(message: object, texts: Iterable[object]) -> bool:
    """Whether ``message`` holds a run of ``QUOTE_WINDOW_CHARS`` of any text, or a short text.

    Cheap enough for the error path: the message is at most a few hundred characters, so it
    is cut into windows and each window is looked up in the texts. Values of ``texts`` that
    are no text are passed over (bytes are read as UTF-8); a ``message`` that is no text
    quotes nothing. Never raises.
    """
    if not isinstance(message, str):
        return False
    plain = [text for text in map(_as_text, _listed(texts)) if text]
    for text in plain:
        short = text.strip()
        if QUOTE_MIN_CHARS <= len(short) < QUOTE_WINDOW_CHARS and short in message:
            return True
    windows = {
        message[start : start + QUOTE_WINDOW_CHARS]
        for start in range(max(len(message) - QUOTE_WINDOW_CHARS + 1, 0))
    }
    return any(window in text for window in windows for text in plain)


def _listed(texts: Iterable[object]) -> list[object]:
    """``texts`` as a list; nothing when it is None, no iterable, or raises while iterated."""
    if isinstance(texts, str | bytes | bytearray):
        return [texts]  # one text handed on its own, not a list of its characters
    try:
        return list(texts or ())
    except Exception:
        return []


def _as_text(value: object) -> str | None:
    """``value`` as the plain text it would show in a message, or None (None, numbers, …)."""
    try:
        if issubclass(type(value), str):
            return str.__str__(cast(str, value))
        if issubclass(type(value), bytes | bytearray):
            return bytes.decode(bytes(cast(bytes, value)), "utf-8", "replace")
    except Exception:  # a subclass whose conversion raises shows nothing
        return None
    return None


def _error_text(error: BaseException) -> str:
    """The error's own message as plain text; "" when it has none that can be read."""
    try:
        text = error.message if isinstance(error, GatewayError) else str(error)
    except Exception:
        return ""
    return str.__str__(text) if issubclass(type(text), str) else ""


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
