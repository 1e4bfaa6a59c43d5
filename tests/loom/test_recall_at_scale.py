"""A startup recall of a huge pack answers, and never holds the event loop (REC-1, REC-2, REC-5).

Nerve's engine runs the recall on the loop that also serves its sessions, and the recall's own
5 s read is a timer on that loop: work that holds the loop delays every session and keeps that
timer from firing. So the pack below is the size that once held it for minutes (100,000
memories, about 6 MB), served by a real loopback gateway as one JSON body, as a JSON body whose
pack is in the text block only, and as an event stream. While the recall runs, a probe task
ticks on the same loop and keeps the largest gap between its ticks, measured on the loop's own
clock; that gap is how long something held the loop.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from provisioner.runtime.loom import recall as recall_module
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.recall import pack_lines
from provisioner.runtime.loom.recalled import fit_block, sanitize_recalled
from tests.runtime.loopback import LoopbackServer

from .conftest import loom_config

pytestmark = pytest.mark.anyio

PACK_ITEMS = 100_000
# REC-5: what "never holds the loop" means here. The recall's own slices are far shorter
# (about 10 ms); the rest of the bound is room for a shared machine.
LOOP_HOLD_BOUND_S = 0.05
PROBE_TICK_S = 0.001
# A busy machine can stall the whole process now and then, which the probe cannot tell from
# a hold. A hold the recall causes comes back every time, so a recall gets this many tries to
# show one run within the bound.
TRIES = 3

CATALOG = {
    "schemaVersion": 1,
    "generation": 3,
    "digest": "sha256:" + "3" * 64,
    "servers": [{"id": "loom", "path": "/s/loom/mcp", "tools": ["loom_context_pack"]}],
}
ANSWER_SHAPES = ("json", "json-text-only", "sse")


def pack_texts(count: int) -> list[str]:
    return [f"fact {n}: likes green tea" for n in range(count)]


def pack_answer(texts: list[str]) -> dict[str, Any]:
    items = [{"memory_key": f"m{n}", "text": text} for n, text in enumerate(texts)]
    return {"mode": "startup", "namespace": "agent", "sections": {"memories": {"items": items}}}


class PackGateway:
    """Answers ``/catalog`` and every ``tools/call`` with one prebuilt pack, in ``shape``."""

    def __init__(self, pack: dict[str, Any]) -> None:
        pack_json = json.dumps(pack, separators=(",", ":"))
        short_text = [{"type": "text", "text": "pack"}]
        self.bodies = {
            "json": _rpc({"content": short_text, "structuredContent": pack}),
            "json-text-only": _rpc({"content": [{"type": "text", "text": pack_json}]}),
        }
        self.bodies["sse"] = b"event: message\ndata: " + self.bodies["json"] + b"\n\n"
        self.shape = "json"
        self.base_url = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/catalog":
            await _send(send, "application/json", json.dumps(CATALOG).encode())
            return
        while (await receive()).get("more_body"):
            pass
        kind = "text/event-stream" if self.shape == "sse" else "application/json"
        await _send(send, kind, self.bodies[self.shape])


def _rpc(result: dict[str, Any]) -> bytes:
    # The backend numbers its calls from 1, and a recall of a fresh backend is its first call.
    message = {"jsonrpc": "2.0", "id": 1, "result": {**result, "isError": False}}
    return json.dumps(message, separators=(",", ":")).encode()


async def _send(send: Any, kind: str, body: bytes) -> None:
    headers = [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def pack_gateway() -> Iterator[PackGateway]:
    app = PackGateway(pack_answer(pack_texts(PACK_ITEMS)))
    server = LoopbackServer(app, lifespan="off")
    app.base_url = server.start()
    yield app
    server.stop()


class LoopProbe:
    """A task that ticks every ``PROBE_TICK_S`` and keeps the largest gap between two ticks.

    The gap is read on the loop's own clock, so it is exactly how late the loop woke the task:
    the time some other callback held it. The gap still open when the probe stops counts too,
    or work that held the loop to the very end would go unseen.
    """

    def __init__(self) -> None:
        self.largest_gap_s = 0.0
        self.ticks = 0
        self._last_tick = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopProbe:
        # A full garbage collection that earlier tests left due would land wherever the next
        # allocations happen to be, and hold the loop for its own reasons; it is paid first.
        gc.collect()
        self._last_tick = asyncio.get_running_loop().time()
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._note_gap(asyncio.get_running_loop().time())

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(PROBE_TICK_S)
            self._note_gap(loop.time())
            self.ticks += 1

    def _note_gap(self, now: float) -> None:
        self.largest_gap_s = max(self.largest_gap_s, now - self._last_tick)
        self._last_tick = now


def first_lines_that_fit(texts: list[str]) -> tuple[str, ...]:
    lines = [sanitize_recalled(text, source="pack") for text in texts[:2000]]
    kept, _dropped = fit_block([f"- {line}" for line in lines], 0)
    return tuple(line[2:] for line in kept)


class TestRecallOfAHugePack:
    @pytest.mark.parametrize("shape", ANSWER_SHAPES)
    async def test_a_pack_of_100000_memories_is_recalled_without_holding_the_loop(
        self, tmp_path: Path, pack_gateway: PackGateway, shape: str
    ) -> None:
        """REC-5, REC-1: the recall answers the lines that fit the block, and no step of it
        (reading the 6 MB body, decoding it, making lines safe) holds the loop past the bound.
        """
        pack_gateway.shape = shape
        expected = first_lines_that_fit(pack_texts(PACK_ITEMS))
        config = loom_config(tmp_path, pack_gateway.base_url)
        gaps_ms: list[float] = []
        for attempt in range(TRIES):
            async with LoomMemory.from_config(config) as memory, LoopProbe() as probe:
                recall = await memory.startup_recall(f"s-{attempt}")
            assert recall.recalled is True, memory.diagnostics()["last_error"]
            assert recall.source == "pack"
            assert recall.items == expected
            assert probe.ticks > 0
            gaps_ms.append(round(probe.largest_gap_s * 1000))
            if probe.largest_gap_s <= LOOP_HOLD_BOUND_S:
                break
        assert min(gaps_ms) <= LOOP_HOLD_BOUND_S * 1000, f"the loop was held for {gaps_ms} ms"


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

    async def test_a_pack_whose_memories_all_clean_to_nothing_lets_the_loop_run(self) -> None:
        """REC-5: work that fills no line still yields the loop; the pack is simply empty."""
        invisible = "\u200b\u2060\ufeff" * 1300  # the head an item is read to, all of it hidden
        items = [{"memory_key": f"k{n}", "text": invisible} for n in range(3000)]
        gaps_ms: list[float] = []
        for _attempt in range(TRIES):
            async with LoopProbe() as probe:
                lines = await pack_lines({"sections": {"memories": {"items": items}}})
            assert lines == ()
            gaps_ms.append(round(probe.largest_gap_s * 1000))
            if probe.largest_gap_s <= LOOP_HOLD_BOUND_S:
                break
        assert min(gaps_ms) <= LOOP_HOLD_BOUND_S * 1000, f"the loop was held for {gaps_ms} ms"
