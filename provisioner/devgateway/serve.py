"""Running the dev gateway: in a thread of the calling process, or in the foreground (CLI).

Both bind 127.0.0.1 only. ``serve_in_thread`` is for tests and benchmarks; ``serve_forever``
is ``nerve dev gateway``, which prints the configuration line to paste and serves until it is
interrupted.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from provisioner.devgateway.app import DevGateway
from provisioner.devgateway.faults import FaultPlan
from provisioner.devgateway.store import LoomStandIn

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


@dataclass
class RunningGateway:
    """A dev gateway serving in a background thread.

    ``base_url`` is the ``mcp_gateway_url`` to configure; ``app`` gives the stand-in's
    ``store``, the ``faults`` plan and the ``calls`` seen; ``stop()`` ends it and waits.
    """

    base_url: str
    app: DevGateway
    stop: Callable[[], None]

    def __enter__(self) -> RunningGateway:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def build_gateway(
    *,
    seed: int = 0,
    faults: str = "",
    data_dir: Path | None = None,
    answers: str = "mixed",
    log: Callable[[str], None] | None = None,
    older_memory_set: bool = False,
) -> DevGateway:
    """The app with its stand-in store and fault plan; ``FaultSpecError`` for a bad spec.
    ``older_memory_set`` serves ``loom_memory_set`` as an older Loom does (REL-8)."""
    plan = FaultPlan(faults, seed=seed)
    store = LoomStandIn(data_dir)
    return DevGateway(
        store=store, faults=plan, answers=answers, log=log, older_memory_set=older_memory_set
    )


def _server(app: DevGateway, port: int) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=LOOPBACK,
        port=port,
        log_level="critical",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    return uvicorn.Server(config)


def _bound_port(server: uvicorn.Server) -> int:
    return int(server.servers[0].sockets[0].getsockname()[1])


def serve_in_thread(
    *,
    port: int = 0,
    seed: int = 0,
    faults: str = "",
    data_dir: Path | None = None,
    answers: str = "mixed",
    older_memory_set: bool = False,
) -> RunningGateway:
    """Start a dev gateway on ``port`` (0: a free one) in a daemon thread; see the package doc.

    Raises ``RuntimeError`` when it does not start within ``START_TIMEOUT_S`` (the port is
    taken, say), and ``FaultSpecError`` for a bad ``faults`` spec.
    """
    app = build_gateway(
        seed=seed,
        faults=faults,
        data_dir=data_dir,
        answers=answers,
        older_memory_set=older_memory_set,
    )
    server = _server(app, port)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve()), name="nerve-dev-gateway", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the dev gateway did not start on {LOOPBACK}:{port}")
        time.sleep(0.005)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=STOP_TIMEOUT_S)
        app.store.close()

    return RunningGateway(f"http://{LOOPBACK}:{_bound_port(server)}", app, stop)


def serve_forever(
    listening: socket.socket,
    *,
    seed: int,
    faults: str,
    data_dir: Path | None,
    answers: str,
    ready: Callable[[], None] = lambda: None,
    older_memory_set: bool = False,
) -> None:
    """Serve on the ``listening`` socket in the foreground until interrupted.

    The caller bound the socket before this module's heavy imports, so a client that connects
    while the server is still starting waits in the socket's backlog instead of being refused.
    ``ready`` is called once the stand-in's memories are open (the command then prints the
    URL to use); a ``data_dir`` whose file cannot be used raises ``FileFault`` before that.
    """

    def log(line: str) -> None:
        print(f"dev gateway: {line}", file=sys.stderr, flush=True)

    app = build_gateway(
        seed=seed,
        faults=faults,
        data_dir=data_dir,
        answers=answers,
        older_memory_set=older_memory_set,
    )
    ready()
    app.set_log(log)
    server = _server(app, 0)
    where = data_dir or "memory (lost on exit)"
    log(f"seed {seed}; faults: {app.faults.spec or 'none'}; memories in {where}")
    try:
        asyncio.run(server.serve(sockets=[listening]))
    finally:
        app.store.close()
