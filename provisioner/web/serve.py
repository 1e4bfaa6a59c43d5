"""``nerve web``: the Memory page and its card served on loopback, in the foreground (OPS-3).

``MemoryPage(config, state=…)`` holds the Starlette app (``app``): ``memory_router``'s routes
(the page at ``/memory``, the card's JSON), ``/`` sending the browser to the page, and the dev
gateway's loopback rule (``provisioner.base.loopback``) in front of all of them, so a request
whose ``Host`` or ``Origin`` names another machine is answered 403 and reaches no route. Under Loom
the app runs a real ``LoomMemory`` for as long as it serves, and probes Loom's health before
each view of the page or of the diagnostics, so the card says what Loom answers now rather
than what it answered when the server started; a failed probe shows as the last error, never
as a 500.

``MemoryPage.serve_until_signalled(listening)`` serves on a socket the caller bound and returns
once SIGINT or SIGTERM arrived and the server stopped, so the command can exit 0. Uvicorn runs
in a thread of its own: in the main thread it would handle both signals itself and raise them
again once stopped, which ends the process as killed (SIGTERM) or interrupted (SIGINT). A view
waiting on a probe when the stop comes is answered at once with what is known, so a hung Loom
neither holds the stop up nor leaves a cancelled request behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from provisioner.base.loopback import is_loopback_request
from provisioner.config.model import Config
from provisioner.runtime.face import GatewayError, LoomMemory, MemoryBackendUnavailable
from provisioner.web.page import PAGE_HEADERS
from provisioner.web.routes import SafeJSONResponse, memory_router

if TYPE_CHECKING:
    from provisioner.runtime.face import StateStore

PAGE_PATH = "/memory"
PROBED_PATHS = frozenset({PAGE_PATH, "/api/diagnostics/memory"})  # what shows diagnostics
HTTP_FORBIDDEN = 403
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACEFUL_STOP_S = 1  # our choice: open requests get this long once a stop is asked for
SERVER_LOG_LEVEL = "error"  # a request that fails is still told on stderr; nothing else is


class LiveMemory:
    """The Loom backend the page shows while the server runs; none under memU.

    ``lifespan`` opens it when the server starts and closes it when the server stops.
    ``fresh()`` waits for a health probe: a caller arriving while one runs joins it instead
    of starting another, so a burst of views costs Loom one call.
    """

    def __init__(self, config: Config, state: StateStore | None = None) -> None:
        self._config = config
        self._state = state
        self.memory: LoomMemory | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()
        self._probing: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self._loop = asyncio.get_running_loop()
        if self._config.memory_backend != "loom":
            yield
            return
        async with LoomMemory.from_config(self._config, state=self._state) as memory:
            self.memory = memory
            try:
                yield
            finally:
                self.memory = None
                if self._probing is not None:  # no probe outlives the backend it asks
                    self._probing.cancel()
                    await asyncio.wait({self._probing})

    async def fresh(self) -> None:
        """Wait for a probe of Loom's health, or stop waiting once the server is stopping."""
        memory = self.memory
        if memory is None:
            return
        if self._probing is None or self._probing.done():
            self._probing = asyncio.create_task(_probe(memory))
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({self._probing, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    def stop_waiting(self) -> None:
        """From any thread: views waiting on a probe are answered now (the server stops)."""
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                self._loop.call_soon_threadsafe(self._stopping.set)


async def _probe(memory: LoomMemory) -> None:
    """Probe Loom's health; a failure is kept in the diagnostics' last error, not raised."""
    try:
        await memory.health()
    except MemoryBackendUnavailable as error:  # no gateway URL: health() notes nothing
        memory.note_error("health", error)
    except GatewayError:
        pass  # health() noted it; the diagnostics show it as the last error


class LoopbackOnly:
    """ASGI middleware: a request naming another machine in Host or Origin gets 403 (OPS-3)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_loopback_request(scope["headers"]):
            refusal = SafeJSONResponse(
                {"error": "this server answers only requests that name 127.0.0.1 or localhost"},
                HTTP_FORBIDDEN,
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


class ProbeFirst:
    """ASGI middleware: a GET of the page or the diagnostics probes Loom before it is answered."""

    def __init__(self, app: ASGIApp, live: LiveMemory) -> None:
        self.app = app
        self.live = live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] in PROBED_PATHS:
            await self.live.fresh()
        await self.app(scope, receive, send)


class MemoryPage:
    """The Memory page's app for ``config``, and serving it until a signal (OPS-3).

    ``state`` is the runtime's state file, if any: through it the card shows the last error
    the sweep met in another process. It stays the caller's to close.
    """

    def __init__(self, config: Config, *, state: StateStore | None = None) -> None:
        self.live = LiveMemory(config, state)
        live = self.live

        async def to_page(request: Request) -> Response:
            return RedirectResponse(PAGE_PATH, headers=PAGE_HEADERS)

        async def refused(request: Request, exc: Exception) -> Response:
            """Starlette's own 404 and 405, with the page's headers like every other answer."""
            if not isinstance(exc, HTTPException):  # registered for HTTPException alone
                raise exc
            reason = f"{exc.status_code} {exc.detail}; the Memory page is at {PAGE_PATH}"
            return SafeJSONResponse({"error": reason}, exc.status_code, exc.headers)

        routes = [
            Route("/", to_page, methods=["GET"]),
            *memory_router(config, _current(live)).routes,
        ]
        self.app = Starlette(
            routes=routes,
            middleware=[Middleware(LoopbackOnly), Middleware(ProbeFirst, live=live)],
            exception_handlers={HTTPException: refused},
            lifespan=live.lifespan,
        )

    def serve_until_signalled(
        self, listening: socket.socket, *, announce: Callable[[], None] = lambda: None
    ) -> int:
        """Serve on ``listening`` until SIGINT or SIGTERM; returns the signal's number.

        ``announce`` runs once the signals are caught here, just before serving starts: what it
        prints (the URL) is printed only when a stop will be clean. A second signal during the
        stop ends open requests at once. An error that stops the server any other way is raised
        here, after the signal handlers were put back.
        """
        server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                log_level=SERVER_LOG_LEVEL,
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=GRACEFUL_STOP_S,
            )
        )
        stopped = threading.Event()
        caught: list[int] = []
        failed: list[BaseException] = []

        def on_signal(number: int, frame: FrameType | None) -> None:
            caught.append(number)
            if server.should_exit:  # the second signal: stop waiting for open requests
                server.force_exit = True
            server.should_exit = True
            self.live.stop_waiting()

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[listening]))
            except BaseException as error:  # raised again in the calling thread
                failed.append(error)
            finally:
                stopped.set()

        previous: dict[signal.Signals, Any] = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
        thread = threading.Thread(target=run, name="nerve-web", daemon=True)
        try:
            for sig in STOP_SIGNALS:
                signal.signal(sig, on_signal)
            announce()
            thread.start()
            stopped.wait()
            thread.join()
        finally:
            for sig, handler in previous.items():
                with contextlib.suppress(TypeError, ValueError):  # a handler set outside Python
                    signal.signal(sig, handler)
        if failed:
            raise failed[0]
        if not caught:
            raise RuntimeError("the page server stopped without being asked to (see stderr)")
        return caught[0]


def _current(live: LiveMemory) -> Callable[[], LoomMemory | None]:
    """The backend the routes ask for on each request: the one open now, if any."""
    return lambda: live.memory
