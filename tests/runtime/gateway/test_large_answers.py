"""Large answers are read without holding the event loop, and mean what small ones do (GW-5).

The gateway client runs on the loop that serves Nerve's sessions, and its deadlines are timers
on that loop. JSON longer than ``INLINE_DECODE_MAX_CHARS`` is therefore decoded in a worker
thread by Python's own scanner, whose value and failures must be exactly those of
``json.loads``; a long JSON text in a result is decoded the same way before the result is
sorted. The probe of ``loop_probe.py`` measures the loop's longest hold on its own clock.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from typing import Any

import pytest

from provisioner.runtime.gateway.answers import _with_long_text_decoded
from provisioner.runtime.gateway.errors import ToolRefused
from provisioner.runtime.gateway.outcomes import outcome_of_message
from provisioner.runtime.gateway.wire import (
    INLINE_DECODE_MAX_CHARS,
    NotJson,
    decode_json_off_loop,
)

DECODED_BEFORE_THE_WAIT = 100  # objects parsed before the decoder waits for the loop to run
LOOP_WAIT_S = 30  # a failure guard only: a loop that is let run answers within a turn


pytestmark = pytest.mark.anyio


def large_document(items: int) -> dict[str, Any]:
    """A pack-like document with every kind of JSON value, strings with escapes included."""
    rng = random.Random(items)
    memories = [
        {
            "memory_key": f"m-{n}",
            "text": f'fact {n}: "quoted" \\ back\tslash, Zoë → 東京 🎉 \u2028 {rng.random()}',
            "score": rng.random() * 10 ** rng.randint(-5, 5),
            "count": rng.randint(-(10**12), 10**12),
            "pinned": n % 3 == 0,
            "expires": None,
            "tags": ["a", "b", n],
        }
        for n in range(items)
    ]
    return {"mode": "startup", "sections": {"memories": {"items": memories}}}


BIG = large_document(4_000)  # about 700 kB of JSON, well past the inline limit


class TestDecodingOffTheLoop:
    @pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "utf-8"])
    async def test_a_large_body_decodes_to_the_value_json_loads_gives(
        self, ensure_ascii: bool
    ) -> None:
        body = json.dumps(BIG, ensure_ascii=ensure_ascii).encode()
        assert len(body) > INLINE_DECODE_MAX_CHARS
        assert await decode_json_off_loop(body) == json.loads(body)
        assert await decode_json_off_loop(body.decode()) == json.loads(body)

    async def test_a_large_body_with_a_utf8_byte_order_mark_decodes_as_json_loads_does(
        self,
    ) -> None:
        body = b"\xef\xbb\xbf" + json.dumps(BIG).encode()
        assert await decode_json_off_loop(body) == json.loads(body)

    @pytest.mark.parametrize(
        "broken",
        [
            json.dumps(BIG).encode()[:-1],
            json.dumps(BIG).encode() + b"}",
            json.dumps(BIG).encode().replace(b"fact 7:", b"fact \xff:"),
            b"[" * 5_000 + b"0" + b"]" * 5_000 + b" " * INLINE_DECODE_MAX_CHARS,
            "\ufeff" + json.dumps(BIG),
        ],
        ids=["cut", "trailing-data", "not-utf-8", "too-deep", "str-with-bom"],
    )
    async def test_a_large_body_that_json_loads_refuses_is_not_json(self, broken: Any) -> None:
        """GW-5: whatever the bytes, a broken answer and never a crash or another error."""
        assert len(broken) > INLINE_DECODE_MAX_CHARS
        with pytest.raises(NotJson):
            await decode_json_off_loop(broken)

    async def test_a_6_mb_body_is_decoded_while_the_loop_runs(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """REC-5: json.loads would hold the loop for the whole parse, about 50 ms for 6 MB.

        Ordered, not timed: part-way through the parse the decoder waits until a task on the
        loop has run. Decoded on the loop's thread, or by the C scanner that keeps the
        interpreter's lock, that task could never run and the wait would fail.
        """
        body = json.dumps(large_document(30_000)).encode()
        assert len(body) > 5_000_000
        loop_ran = threading.Event()
        python_scanners: list[object] = []
        make_scanner = json.scanner.py_make_scanner  # type: ignore[attr-defined]

        def scanner_that_waits_for_the_loop(decoder: json.JSONDecoder) -> Any:
            python_scanners.append(decoder)
            parse_object, objects = decoder.parse_object, 0

            def parse_and_wait(*args: Any) -> Any:
                nonlocal objects
                objects += 1
                if objects == DECODED_BEFORE_THE_WAIT:
                    assert loop_ran.wait(LOOP_WAIT_S), "the loop did not run during the parse"
                return parse_object(*args)

            decoder.parse_object = parse_and_wait
            return make_scanner(decoder)

        monkeypatch.setattr(json.scanner, "py_make_scanner", scanner_that_waits_for_the_loop)

        async def run_once_on_the_loop() -> None:
            await asyncio.sleep(0)
            loop_ran.set()

        ticker = asyncio.create_task(run_once_on_the_loop())
        decoded = await decode_json_off_loop(body)
        await ticker
        assert len(decoded["sections"]["memories"]["items"]) == 30_000
        assert len(python_scanners) == 1


def text_result(text: str) -> dict[str, Any]:
    content = [{"type": "image", "data": "x"}, {"type": "text", "text": text}]
    return {"jsonrpc": "2.0", "id": 7, "result": {"content": content, "isError": False}}


class TestLongTextResults:
    async def test_a_long_json_text_gives_the_tool_result_it_would_have_given(self) -> None:
        """GW-5: decoded off the loop beforehand, the result sorts to the very same value."""
        message = text_result(json.dumps(BIG))
        prepared = await _with_long_text_decoded(message)
        assert prepared is not message
        assert outcome_of_message(prepared, 7) == outcome_of_message(message, 7)

    @pytest.mark.parametrize(
        "text",
        [
            json.dumps([BIG]),
            "plain words " * 30_000,
            json.dumps(BIG)[:-1],
            json.dumps({"short": True}),
        ],
        ids=["a-list", "not-json", "broken-json", "short"],
    )
    async def test_any_other_text_is_left_for_the_result_sorting_as_it_is(self, text: str) -> None:
        message = text_result(text)
        assert await _with_long_text_decoded(message) is message

    async def test_a_refusal_keeps_its_text(self) -> None:
        """GW-5: a tool that refused is told by ``isError``, whatever its text holds."""
        message = text_result(json.dumps(BIG))
        message["result"]["isError"] = True
        with pytest.raises(ToolRefused, match="fact 0"):
            outcome_of_message(await _with_long_text_decoded(message), 7)
