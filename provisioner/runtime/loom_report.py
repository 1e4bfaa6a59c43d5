"""The last error the Loom backend met, as diagnostics show it (LOOM-4).

Either side may meet an error — the backend on a recall or a health probe, the sweep on an
extraction — and diagnostics show the most recent one: when, which op, which outcome class,
and its one-line message. Never any message text: an error whose message quotes text that
was sent (a Loom fault that echoes a transcript line, say) is shown without its message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from provisioner.runtime.errors import GatewayError, bounded_message

QUOTE_WINDOW_CHARS = 24  # our choice: a shared run this long means the message quotes a text
QUOTE_MIN_CHARS = 6  # our choice: a whole text shorter than this is too common to look for
WITHHELD = "(message withheld: it quotes text that was sent)"


@dataclass(frozen=True)
class LastError:
    """One error: wall time (seconds since the epoch), op, outcome class, one-line message."""

    at: float
    op: str
    kind: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "at": datetime.fromtimestamp(self.at, UTC).isoformat(timespec="seconds"),
            "op": self.op,
            "kind": self.kind,
            "message": self.message,
        }


class ErrorRecord:
    """Keeps the most recent error; ``wall_clock`` gives seconds since the epoch."""

    def __init__(self, wall_clock: Callable[[], float]) -> None:
        self._wall_clock = wall_clock
        self.last: LastError | None = None

    def note(self, op: str, error: BaseException, *, sent_texts: Sequence[str] = ()) -> LastError:
        """Record ``error`` met during ``op``; ``sent_texts`` are texts it must not quote."""
        text = error.message if isinstance(error, GatewayError) else str(error)
        message = bounded_message(text) or type(error).__name__
        if quotes_any(message, sent_texts):
            message = WITHHELD
        self.last = LastError(self._wall_clock(), op, type(error).__name__, message)
        return self.last


def quotes_any(message: str, texts: Sequence[str]) -> bool:
    """Whether ``message`` holds a run of ``QUOTE_WINDOW_CHARS`` of any text, or a short text.

    Cheap enough for the error path: the message is at most a few hundred characters, so it
    is cut into windows and each window is looked up in the texts.
    """
    if not texts:
        return False
    for text in texts:
        if QUOTE_MIN_CHARS <= len(text.strip()) < QUOTE_WINDOW_CHARS and text.strip() in message:
            return True
    windows = {
        message[start : start + QUOTE_WINDOW_CHARS]
        for start in range(max(len(message) - QUOTE_WINDOW_CHARS + 1, 0))
    }
    return any(window in text for window in windows for text in texts)
