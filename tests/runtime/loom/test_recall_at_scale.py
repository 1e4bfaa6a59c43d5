"""A startup recall of a huge pack answers, and never holds the event loop (REC-1, REC-2, REC-5).

Nerve's engine runs the recall on the loop that also serves its sessions, and the recall's own
5 s read is a timer on that loop: work that holds the loop delays every session and keeps that
timer from firing. So the pack below is the size that once held it for minutes (100,000
memories, about 6 MB), served by a real loopback gateway as one JSON body, as a JSON body whose
pack is in the text block only, and as an event stream.

The hold is counted, not timed (``tests/support/loop_probe.py``): a probe task runs once per
turn of the loop and notes how many memories were made into lines since its last turn, while
the line-making reads a clock that moves a fixed step per read (``recall.hold_clock``), so it
yields after the same number of memories on any machine; and every JSON text the loop's own
thread decodes is measured, so a large one decoded there instead of in a worker is seen. Nor
does the recall race the clock: its 5 s would make a slow or busy machine fail a test about
work, not time, so the backend here is given a deadline it never reaches (``GUARD_S``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from provisioner.runtime.gateway.protocol import INLINE_DECODE_MAX_CHARS
from provisioner.runtime.loom import recall as recall_module
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.recall import YIELD_AFTER_S, pack_lines
from provisioner.runtime.loom.recalled import fit_block, sanitize_recalled
from tests.fakes.gateway import FakeGateway, rpc_result
from tests.support.loop_probe import TickingClock, WorkProbe
from tests.support.loopback import LoopbackServer

pytestmark = pytest.mark.anyio

PACK_ITEMS = 100_000
GUARD_S = 600.0  # the recall's deadline here: a guard against a hung test, never reached

CATALOG = {
    "schemaVersion": 1,
    "generation": 3,
    "digest": "sha256:" + "3" * 64,
    "servers": [{"id": "loom", "path": "/s/loom/mcp", "tools": ["loom_context_pack"]}],
}
ANSWER_SHAPES = ("json", "json-text-only", "sse")
# The line-making's clock moves a quarter of YIELD_AFTER_S per read, and it reads it once per
# memory: it yields after four memories, five when the float sum falls just short.
READS_PER_YIELD = 4
MOST_MEMORIES_PER_TURN = READS_PER_YIELD + 1


def pack_texts(count: int) -> list[str]:
    return [f"fact {n}: likes green tea" for n in range(count)]


def pack_answer(texts: list[str]) -> dict[str, Any]:
    items = [{"memory_key": f"m{n}", "text": text} for n, text in enumerate(texts)]
    return {"mode": "startup", "namespace": "agent", "sections": {"memories": {"items": items}}}


def pack_bodies(pack: dict[str, Any]) -> dict[str, tuple[str, bytes]]:
    """The answer carrying ``pack`` in each shape, prebuilt: (content type, body)."""
    pack_json = json.dumps(pack, separators=(",", ":"))
    short_text = [{"type": "text", "text": "pack"}]
    # The backend numbers its calls from 1, and a recall of a fresh backend is its first call.
    answer = rpc_result({"content": short_text, "structuredContent": pack})
    text_only = rpc_result({"content": [{"type": "text", "text": pack_json}]})
    return {
        "json": ("application/json", answer),
        "json-text-only": ("application/json", text_only),
        "sse": ("text/event-stream", b"event: message\ndata: " + answer + b"\n\n"),
    }


@pytest.fixture(scope="module")
def pack_gateway() -> Iterator[tuple[FakeGateway, dict[str, tuple[str, bytes]]]]:
    """The gateway, serving ``CATALOG``, and the pack's answer in each shape for it to play."""
    app = FakeGateway(catalog=CATALOG)
    server = LoopbackServer(app, lifespan="off")
    app.base_url = server.start()
    yield app, pack_bodies(pack_answer(pack_texts(PACK_ITEMS)))
    server.stop()


@pytest.fixture
def memories_made(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count the memories made into lines, on a line-making clock that moves per read."""
    made: list[str] = []

    def counting(text: str, *, source: str) -> str:
        made.append(text)
        return sanitize_recalled(text, source=source)

    monkeypatch.setattr(recall_module, "sanitize_recalled", counting)
    monkeypatch.setattr(recall_module, "hold_clock", TickingClock(YIELD_AFTER_S / READS_PER_YIELD))
    return lambda: len(made)


@pytest.fixture
def decoded_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every JSON text ``json.loads`` decodes on this (the loop's) thread."""
    loop_thread = threading.get_ident()
    lengths: list[int] = []
    loads = json.loads

    def measuring(text: str | bytes, **options: Any) -> Any:
        if threading.get_ident() == loop_thread:
            lengths.append(len(text))
        return loads(text, **options)

    monkeypatch.setattr(json, "loads", measuring)
    return lengths


def first_lines_that_fit(texts: list[str]) -> tuple[str, ...]:
    lines = [sanitize_recalled(text, source="pack") for text in texts[:2000]]
    kept, _dropped = fit_block([f"- {line}" for line in lines], 0)
    return tuple(line[2:] for line in kept)


class TestRecallOfAHugePack:
    @pytest.mark.parametrize("shape", ANSWER_SHAPES)
    async def test_a_pack_of_100000_memories_is_recalled_without_holding_the_loop(
        self,
        pack_gateway: tuple[FakeGateway, dict[str, tuple[str, bytes]]],
        shape: str,
        memories_made: Callable[[], int],
        decoded_on_the_loop: list[int],
    ) -> None:
        """REC-5, REC-1: the recall answers the lines that fit the block; the 6 MB body is
        decoded off the loop, and the loop comes round every few memories made into lines."""
        gateway, bodies = pack_gateway
        gateway.raw_answer = bodies[shape]
        expected = first_lines_that_fit(pack_texts(PACK_ITEMS))
        memory = LoomMemory(gateway_url=gateway.base_url, recall_deadline_s=GUARD_S)
        async with memory, WorkProbe(memories_made) as probe:
            recall = await memory.startup_recall("s-1")
        assert recall.recalled is True, memory.diagnostics()["last_error"]
        assert recall.source == "pack"
        assert recall.items == expected
        assert max(decoded_on_the_loop, default=0) <= INLINE_DECODE_MAX_CHARS
        assert memories_made() == len(expected) + 1  # and the first that did not fit
        assert 0 < probe.most_between_turns <= MOST_MEMORIES_PER_TURN
        assert probe.turns >= memories_made() // MOST_MEMORIES_PER_TURN


class TestRecallWorkIsCapped:
    async def test_items_past_the_block_cap_are_never_cleaned(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """REC-5: cleaning stops at the first line that no longer fits the block."""
        cleaned: list[str] = []

        def counting(text: str, *, source: str) -> str:
            cleaned.append(text)
            return sanitize_recalled(text, source=source)

        monkeypatch.setattr(recall_module, "sanitize_recalled", counting)
        texts = pack_texts(10_000)
        lines = await pack_lines(pack_answer(texts))
        assert lines == first_lines_that_fit(texts)
        assert len(cleaned) == len(lines) + 1

    async def test_repeated_lines_and_keys_are_kept_once_in_their_first_place(self) -> None:
        """REC-2: one line per memory; a repeat (by key, or by the same safe line) is dropped."""
        items = [
            {"memory_key": "a", "text": "tea"},
            {"memory_key": "b", "text": "coffee"},
            {"memory_key": "a", "text": "a repeated key"},
            {"memory_key": "c", "text": "tea\n"},
            {"memory_key": None, "text": "coffee"},
            {"memory_key": "d", "text": "water"},
        ]
        answer = {"sections": {"memories": {"items": items}}}
        assert await pack_lines(answer) == ("tea", "coffee", "water")

    async def test_a_pack_whose_memories_all_clean_to_nothing_lets_the_loop_run(
        self, memories_made: Callable[[], int]
    ) -> None:
        """REC-5: work that fills no line still yields the loop; the pack is simply empty.

        Counted, not timed: the loop comes round after every few memories however long each
        takes to clean, so a slow or busy machine holds it no longer in memories."""
        invisible = "\u200b\u2060\ufeff" * 1300  # the head an item is read to, all of it hidden
        items = [{"memory_key": f"k{n}", "text": invisible} for n in range(3000)]
        async with WorkProbe(memories_made) as probe:
            lines = await pack_lines({"sections": {"memories": {"items": items}}})
        assert lines == ()
        assert memories_made() == len(items)
        assert 0 < probe.most_between_turns <= MOST_MEMORIES_PER_TURN
        assert probe.turns >= len(items) // MOST_MEMORIES_PER_TURN
