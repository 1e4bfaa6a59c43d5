"""Reading event streams however the bytes are cut and lines are ended (GW-3)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from provisioner.runtime.gateway.protocol import EventStreamDecoder, ServerSentEvent

STREAM_LINES = [
    "\ufeff: ping",
    "",
    "event: message",
    "data: first",
    "",
    ": a comment between events",
    "id: 7",
    "data:two",
    "data:  lines",
    "",
    "event: other",
    "data: é ü 東京",
    "",
    "retry: 100",
    "",
    "data: unfinished at the end",
]
EXPECTED = [
    ServerSentEvent("message", "first"),
    ServerSentEvent("message", "two\n lines", "7"),
    ServerSentEvent("other", "é ü 東京", "7"),
]


def _decode(chunks: list[bytes]) -> list[ServerSentEvent]:
    decoder = EventStreamDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.close()


def _stream(newline: str) -> bytes:
    return newline.join(STREAM_LINES).encode()


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


class TestEventStreamDecoder:
    @pytest.mark.parametrize("newline", ["\n", "\r", "\r\n"], ids=["LF", "CR", "CRLF"])
    def test_each_line_ending_gives_the_same_events(self, newline: str) -> None:
        assert _decode([_stream(newline)]) == EXPECTED

    @given(
        newline=st.sampled_from(["\n", "\r", "\r\n"]),
        cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=25),
    )
    def test_any_chunking_gives_the_same_events(self, newline: str, cuts: list[int]) -> None:
        """Cuts may fall inside a UTF-8 sequence or between the CR and LF of one line break."""
        assert _decode(_cut(_stream(newline), cuts)) == EXPECTED

    def test_a_final_cr_completes_the_last_event(self) -> None:
        assert _decode([b"data: x\r", b"\r"]) == [ServerSentEvent("message", "x")]

    def test_an_event_cut_before_its_blank_line_is_dropped(self) -> None:
        assert _decode([b'data: {"jsonrpc": "2.0", "id": 1}\n']) == []

    def test_an_event_without_data_is_not_dispatched(self) -> None:
        assert _decode([b"event: message\nid: 3\n\n"]) == []

    def test_bytes_that_are_not_utf8_are_refused(self) -> None:
        with pytest.raises(ValueError, match="UTF-8"):
            _decode([b"data: \xff\n\n"])

    def test_a_stream_ending_inside_a_utf8_sequence_is_refused(self) -> None:
        with pytest.raises(ValueError, match="UTF-8"):
            _decode(["data: é".encode()[:-1]])


LONG_LINE_BYTES = 8 * 1024 * 1024
SMALL_CHUNK_BYTES = 256


class TestDecodingCost:
    """Defect: a pending line was copied again on every chunk, quadratic in its length.

    The work is counted, not timed: an unfinished line is kept as the chunks that brought it,
    each held once and never copied into the next, and joined once when its line ends.
    """

    def test_an_8_mib_line_in_256_byte_chunks_is_kept_as_its_chunks_and_joined_once(
        self,
    ) -> None:
        body = b"data: " + b"x" * LONG_LINE_BYTES
        decoder = EventStreamDecoder()
        fed = 0
        for offset in range(0, len(body), SMALL_CHUNK_BYTES):
            assert decoder.feed(body[offset : offset + SMALL_CHUNK_BYTES]) == []
            fed += 1
        pending = decoder._pieces
        assert len(pending) == fed, "one piece per chunk: none was copied into another"
        assert sum(map(len, pending)) == len(body)
        assert max(map(len, pending)) == SMALL_CHUNK_BYTES
        assert [len(event.data) for event in decoder.feed(b"\n\n")] == [LONG_LINE_BYTES]

    def test_a_cr_then_an_lf_in_the_next_chunk_is_one_line_break(self) -> None:
        assert _decode([b"data: a\r", b"\ndata: b\r", b"\n\r\n"]) == [
            ServerSentEvent("message", "a\nb")
        ]

    def test_a_cr_inside_a_chunk_does_not_swallow_an_lf_in_the_next(self) -> None:
        assert _decode([b"data: a\rdata: b", b"\n\n"]) == [ServerSentEvent("message", "a\nb")]
