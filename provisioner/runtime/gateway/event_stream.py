"""An incremental reader of ``text/event-stream`` bodies (GW-3).

The gateway may answer a ``tools/call`` with an event stream instead of one JSON body: zero or
more notifications, keep-alive comments (``: ping``), then the JSON-RPC response as a
``message`` event. Bytes arrive in arbitrary chunks, so this decoder keeps whatever is
unfinished between ``feed`` calls — a UTF-8 sequence, a line, whether the last chunk ended in
a CR whose LF may come next — and hands out each event once its blank line has arrived.

It follows the HTML living standard's parsing rules: lines end in CR, LF or CRLF; a line
starting with ``:`` is a comment; ``data`` lines of one event join with LF; an event with no
data is not dispatched; an unfinished event at the end of the stream is dropped. A body that
is not UTF-8 raises ``ValueError``.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

DEFAULT_EVENT_TYPE = "message"


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (``message`` unless named), its data, its last id."""

    event: str
    data: str
    id: str | None = None


class EventStreamDecoder:
    """Turns chunks of an event stream into ``ServerSentEvent`` objects, in order.

    The work is linear in the bytes fed: only each new chunk is searched for line breaks, and
    an unfinished line is kept as a list of pieces, joined once when its line break arrives.
    A CR ends its line at once; an LF right after it (perhaps in the next chunk) is skipped.
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._pieces: list[str] = []
        self._at_start = True
        self._after_cr = False
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
        return self._take_text(text)

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: an unfinished line and event are dropped."""
        try:
            self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as error:
            raise ValueError(f"event stream ends inside a UTF-8 sequence: {error.reason}") from None
        self._pieces, self._data, self._event_type = [], [], ""
        return []

    def _take_text(self, text: str) -> list[ServerSentEvent]:
        events: list[ServerSentEvent] = []
        start = 0
        if self._after_cr and text.startswith("\n"):
            start = 1
        for match in _LINE_BREAK.finditer(text, start):
            self._pieces.append(text[start : match.start()])
            line = "".join(self._pieces)
            self._pieces = []
            event = self._take_line(line)
            if event is not None:
                events.append(event)
            start = match.end()
        if start < len(text):
            self._pieces.append(text[start:])
        if text:
            self._after_cr = text.endswith("\r")
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


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
