"""Stress: back-to-back tool calls against event streams that end as the client stops reading.

A healthy gateway must never be read as broken. This script starts its own loopback gateway
in a thread with its own event loop: a plain asyncio socket server that answers every
``tools/call`` POST with a chunked event stream holding the result event, keeps the stream
open about ``--tail-ms`` (50 ms, the client's ``STREAM_TAIL_WAIT_S``; spread ±20 %) and only
then ends the chunked body, and keeps the connection alive for the next request. Each run
makes ``--calls`` calls one after the other on one ``McpGatewayServer`` while another task
keeps the client's event loop busy (``--block-ms`` of blocking between awaits, as a loaded
engine does), so the end of a stream and the end of the client's read fall together again and
again. Every answer is complete and well formed; any call that does not return its own result
is a failure, printed with its cause.

    python benchmarks/stress_gateway_stream.py [--runs 10] [--calls 1200] [--tail-ms 50]
        [--block-ms 2] [--idle-close-ms 0] [--server socket|uvicorn]

``--idle-close-ms N`` makes the server close a connection that has been idle for 0 to 2N ms after a
response (0: never; -1: right after each stream ends), so that the client's next request meets
a connection the server is closing: the keep-alive race. ``--server uvicorn`` serves the same
answers from an ASGI app under uvicorn (a test dependency) instead of the socket server.

Exit status: 0 when no call failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from provisioner.runtime.gateway.client import McpGatewayServer
from provisioner.runtime.gateway.errors import GatewayError

MCP_PATH = "/s/loom/mcp"
SHOWN_PER_RUN = 10  # failures printed per run; all are counted
DEADLINE_S = 30.0  # far above any answer here: only a misread answer can fail a call


class StreamingGateway:
    """A loopback gateway answering each POST with a chunked event stream that ends late."""

    def __init__(self, tail_s: float, idle_close_s: float) -> None:
        self._tail_s = tail_s
        self._idle_close_s = idle_close_s
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stress-gateway", daemon=True)
        self._server: asyncio.Server | None = None
        self.requests = 0
        self.url = ""

    def start(self) -> str:
        self._thread.start()
        self._ready.wait()
        return self.url

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shut_down(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()

    async def _shut_down(self) -> None:
        assert self._server is not None
        self._server.close()
        current = asyncio.current_task()
        serving = [task for task in asyncio.all_tasks() if task is not current]
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}{MCP_PATH}"
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(
            ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError
        ):
            answered = False
            while True:
                if answered and self._idle_close_s > 0:
                    try:
                        async with asyncio.timeout(self._idle_close_s * random.uniform(0, 2)):
                            head = await reader.readuntil(b"\r\n\r\n")
                    except TimeoutError:
                        break
                else:
                    head = await reader.readuntil(b"\r\n\r\n")
                length = _content_length(head)
                body = await reader.readexactly(length)
                self.requests += 1
                writer.write(_stream_head() + _chunk(_result_event(body)))
                await writer.drain()
                await asyncio.sleep(self._tail_s * random.uniform(0.8, 1.2))
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                if self._idle_close_s < 0:
                    break
                answered = True
        writer.close()


class UvicornGateway:
    """The same answers from an ASGI app under uvicorn (its keep-alive, its HTTP parser)."""

    def __init__(self, tail_s: float) -> None:
        import uvicorn  # a test dependency; only this server needs it

        self._tail_s = tail_s
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=0,
            log_level="error",
            lifespan="off",
            interface="asgi3",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="stress-uvicorn", daemon=True)
        self.url = ""

    def start(self) -> str:
        self._thread.start()
        while not self._server.started:
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}{MCP_PATH}"
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join()

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    async def _app(self, scope: dict, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": _result_event(body), "more_body": True})
        await asyncio.sleep(self._tail_s * random.uniform(0.8, 1.2))
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def _stream_head() -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\n"
        b"content-type: text/event-stream\r\n"
        b"cache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _result_event(request_body: bytes) -> bytes:
    request = json.loads(request_body)
    arguments = request["params"]["arguments"]
    result = {
        "content": [{"type": "text", "text": json.dumps(arguments)}],
        "structuredContent": arguments,
        "isError": False,
    }
    message = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


@contextlib.asynccontextmanager
async def busy_event_loop(block_s: float) -> AsyncIterator[None]:
    """A task that blocks the loop for ``block_s`` between awaits, as a loaded engine does."""

    async def hog() -> None:
        while True:
            time.sleep(block_s)
            await asyncio.sleep(0)

    task = asyncio.create_task(hog())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _cause_of(error: BaseException) -> str:
    chain = []
    cause: BaseException | None = error
    while cause is not None and len(chain) < 6:
        chain.append(f"{type(cause).__name__}: {cause}".strip())
        cause = cause.__cause__ or cause.__context__
    return " <- ".join(chain)


async def one_run(url: str, calls: int, block_s: float) -> list[str]:
    """``calls`` calls back to back on one server; the failures, described."""
    failures: list[str] = []
    async with McpGatewayServer(url) as server, busy_event_loop(block_s):
        for number in range(calls):
            try:
                result = await server.call_tool("loom_search", {"n": number}, deadline_s=DEADLINE_S)
            except GatewayError as error:
                failures.append(f"call {number}: {_cause_of(error)}")
                continue
            if result.data != {"n": number}:
                failures.append(f"call {number}: answered {result.data!r}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--calls", type=int, default=1200)
    parser.add_argument("--tail-ms", type=float, default=50.0)
    parser.add_argument("--block-ms", type=float, default=2.0)
    parser.add_argument("--idle-close-ms", type=float, default=0.0)
    parser.add_argument("--server", choices=("socket", "uvicorn"), default="socket")
    options = parser.parse_args(argv)
    gateway: StreamingGateway | UvicornGateway
    if options.server == "uvicorn":
        gateway = UvicornGateway(options.tail_ms / 1000)
    else:
        gateway = StreamingGateway(options.tail_ms / 1000, options.idle_close_ms / 1000)
    url = gateway.start()
    kinds: Counter[str] = Counter()
    total = 0
    try:
        for run in range(1, options.runs + 1):
            started = time.monotonic()
            failures = asyncio.run(one_run(url, options.calls, options.block_ms / 1000))
            total += len(failures)
            for shown, failure in enumerate(failures):
                kinds[failure.split(": ", 1)[1].split(" <- ")[0]] += 1
                if shown < SHOWN_PER_RUN:
                    print(f"  run {run} {failure}")
            print(
                f"run {run}: {options.calls} calls, {len(failures)} failed "
                f"({time.monotonic() - started:.1f} s)",
                flush=True,
            )
    finally:
        gateway.stop()
    print(f"all: {options.runs} runs of {options.calls} calls, {total} failed")
    for kind, count in kinds.most_common():
        print(f"  {count} x {kind}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
