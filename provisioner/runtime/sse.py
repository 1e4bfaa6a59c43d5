"""An incremental reader of ``text/event-stream`` bodies (GW-3).

The gateway may answer a ``tools/call`` with an event stream instead of one JSON body: zero or
more notifications, keep-alive comments (``: ping``), then the JSON-RPC response as a
``message`` event. Bytes arrive in arbitrary chunks, so this decoder keeps whatever is
unfinished between ``feed`` calls — a UTF-8 sequence, a line, a CR whose LF may come next —
and hands out each event once its blank line has arrived.

It follows the HTML living standard's parsing rules: lines end in CR, LF or CRLF; a line
starting with ``:`` is a comment; ``data`` lines of one event join with LF; an event with no
data is not dispatched; an unfinished event at the end of the stream is dropped. A body that
is not UTF-8 raises ``ValueError``.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

DEFAULT_EVENT_TYPE = "message"


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (``message`` unless named), its data, its last id."""

    event: str
    data: str
    id: str | None = None


class EventStreamDecoder:
    """Turns chunks of an event stream into ``ServerSentEvent`` objects, in order."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._pending = ""
        self._at_start = True
        self._event_type = ""
        self._data: list[str] = []
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk``; raises ``ValueError`` on bytes that are not UTF-8."""
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError as error:
            raise ValueError(f"event stream is not UTF-8: {error.reason}") from None
        if self._at_start and text:
            text = text.removeprefix("\ufeff")
            self._at_start = False
        self._pending += text
        return self._drain_lines()

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: the events a final CR completes; an unfinished event is dropped."""
        try:
            self._pending += self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as error:
            raise ValueError(f"event stream ends inside a UTF-8 sequence: {error.reason}") from None
        if self._pending.endswith("\r"):
            self._pending += "\n"
        events = self._drain_lines()
        self._pending, self._data, self._event_type = "", [], ""
        return events

    def _drain_lines(self) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        start = 0
        buffer = self._pending
        while True:
            end, after = _next_line_break(buffer, start)
            if end < 0:
                break
            event = self._take_line(buffer[start:end])
            if event is not None:
                events.append(event)
            start = after
        self._pending = buffer[start:]
        return events

    def _take_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event_type = value
        elif field == "id" and "\x00" not in value:
            self._last_id = value
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event_type = self._data, self._event_type
        self._data, self._event_type = [], ""
        if not data:
            return None
        return ServerSentEvent(
            event=event_type or DEFAULT_EVENT_TYPE, data="\n".join(data), id=self._last_id
        )


def _next_line_break(buffer: str, start: int) -> tuple[int, int]:
    """Where the next line ends and the one after starts, or ``(-1, -1)`` if it is unfinished.

    A CR at the very end of the buffer is unfinished: an LF in the next chunk may belong to it.
    """
    cr = buffer.find("\r", start)
    lf = buffer.find("\n", start)
    if lf >= 0 and (cr < 0 or lf < cr):
        return lf, lf + 1
    if cr < 0 or cr == len(buffer) - 1:
        return -1, -1
    if buffer[cr + 1] == "\n":
        return cr, cr + 2
    return cr, cr + 1
