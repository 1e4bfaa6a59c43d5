"""Runs an ASGI app with uvicorn on 127.0.0.1 (port 0) in a background thread, for tests.

The server has its own event loop, so a test's loop and the server's never block each other,
and a fixture can keep one server for a whole module. ``stop()`` asks uvicorn to exit and
waits for the thread; a server that does not start within a few seconds fails the fixture
instead of hanging the suite. ``SilentListener`` and ``CountingListener`` are ports that take
connections and never answer: a gateway that is up but stuck.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import uvicorn

START_TIMEOUT_S = 10.0


class LoopbackServer:
    """One uvicorn server on a free loopback port; ``base_url`` is set once it started."""

    def __init__(self, app: Any, **config: Any) -> None:
        options = {
            "host": "127.0.0.1",
            "port": 0,
            "log_level": "critical",
            "access_log": False,
            "lifespan": "on",
            "timeout_graceful_shutdown": 1,
        }
        options.update(config)
        self._server = uvicorn.Server(uvicorn.Config(app, **options))
        self._thread = threading.Thread(target=self._run, name="loopback-server", daemon=True)
        self.base_url = ""

    def start(self) -> str:
        """Start the server and return its base URL (``http://127.0.0.1:<port>``)."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.005)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self.base_url

    def stop(self) -> None:
        """Ask the server to exit and wait for its thread."""
        self._server.should_exit = True
        self._thread.join(timeout=START_TIMEOUT_S)

    def _run(self) -> None:
        asyncio.run(self._server.serve())


async def read_request_body(receive: Any) -> bytes:
    """The whole body of the ASGI request ``receive`` brings, however many messages carry it."""
    parts = []
    while True:
        message = await receive()
        parts.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(parts)


def closed_port_url() -> str:
    """A loopback URL nothing listens on: the port was bound, then released."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class SilentListener:
    """A loopback port that takes connections into its backlog and never reads or answers.

    ``fill_backlog()`` then fills that backlog, so further connections are never accepted and
    connecting hangs, as against a gateway host that drops packets.
    """

    FILL_CONNECT_TIMEOUT_S = 0.2

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(0)
        self._fillers: list[socket.socket] = []
        self.base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def fill_backlog(self) -> None:
        """Connect until a connection is no longer accepted (the kernel drops the SYN)."""
        for _ in range(16):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.settimeout(self.FILL_CONNECT_TIMEOUT_S)
            self._fillers.append(filler)
            try:
                filler.connect(self._socket.getsockname())
            except OSError:
                return
        raise RuntimeError("the listener's backlog did not fill")

    def close(self) -> None:
        for filler in self._fillers:
            filler.close()
        self._socket.close()


class CountingListener:
    """A TCP listener on 127.0.0.1 that counts connections and never answers."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._socket.settimeout(0.05)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._count = 0
        self._thread = threading.Thread(target=self._accept, name="counting-listener", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    @property
    def connections(self) -> int:
        with self._lock:
            return self._count

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for held in self._held:
            held.close()
        self._socket.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _address = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._count += 1
            self._held.append(connection)  # held open, never answered
