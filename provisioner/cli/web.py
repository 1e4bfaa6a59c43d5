"""``nerve web``: the Memory page and its Diagnostics card on 127.0.0.1, in a browser (OPS-3).

The page is what Nerve's web UI mounts (``provisioner.web.memory_router``); this command serves
it on its own, for an operator who wants to see it without Nerve. It reads the configuration
as ``nerve doctor`` does (``--config-dir``, ``--workspace``), binds 127.0.0.1 only, and answers
only requests naming loopback in ``Host`` and ``Origin``, like ``nerve dev gateway``. Under Loom
the card shows a live ``LoomMemory``, probed before each view, with the last error the sweep
recorded in the runtime's state file when that file exists (none is created).

The server needs the ``web`` extra, imported only when the command runs: ``nerve --help`` stays
fast, and an install without the extra gets one line saying how to add it (exit 2). The first
line printed is the page's URL, with the port taken when ``--port 0``; SIGINT or SIGTERM stop
the server and the command exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.base.command import command, program
from provisioner.cli.common import (
    EXIT_OK,
    LOOPBACK,
    UsageError,
    add_workspace_options,
    listen_on_loopback,
    port_argument,
    refuse_missing_folders,
    workspace_and_config_dir,
)

if TYPE_CHECKING:
    from provisioner.config.model import Config
    from provisioner.runtime.face import StateStore

DEFAULT_PORT = 8788  # our choice: beside the dev gateway's 8787, clear of Nerve's own 8900
WEB_EXTRA_HINT = "pip install 'nerve-provisioner[web]'"
WEB_EXTRA_MODULES = frozenset({"starlette", "uvicorn", "fastapi"})  # the web extra's imports


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``nerve web`` to the top-level parser."""
    web = commands.add_parser(
        "web",
        help="serve the Memory page and its Diagnostics card on 127.0.0.1 (needs the web extra)",
        description=(
            "Serve the Memory page and its Diagnostics card on 127.0.0.1 until Ctrl-C, "
            "for the configured memory backend."
        ),
    )
    web.add_argument(
        "--port",
        type=port_argument,
        default=DEFAULT_PORT,
        help=f"port (0: any free one; default {DEFAULT_PORT})",
    )
    add_workspace_options(web)
    web.set_defaults(handler=_run_web)


def _run_web(args: argparse.Namespace) -> int:
    from provisioner.config.loader import load_config

    refuse_missing_folders(args, workspace=False)  # FLEET-4
    workspace, config_dir = workspace_and_config_dir(args)
    config = load_config(config_dir, workspace)
    with listen_on_loopback(args.port) as listening:
        try:
            from provisioner.web.serve import PAGE_PATH, MemoryPage
        except ImportError as error:
            if (error.name or "").split(".")[0] not in WEB_EXTRA_MODULES:
                raise
            raise UsageError(
                f"{command('web')} needs the web extra ({error.name} is missing): {WEB_EXTRA_HINT}"
            ) from None
        for warning in config.warnings:
            print(f"{program()}: warning: {warning}", file=sys.stderr)
        url = f"http://{LOOPBACK}:{listening.getsockname()[1]}{PAGE_PATH}"

        def announce() -> None:
            print(f"Memory page: {url}", flush=True)
            print(_serving_line(config, config_dir), flush=True)

        with _existing_state(config, config_dir) as state:
            MemoryPage(config, state=state).serve_until_signalled(listening, announce=announce)
    return EXIT_OK


def _serving_line(config: Config, config_dir: Path) -> str:
    """The second line printed: which configuration the page shows, and how to stop it."""
    backend = config.memory_backend
    url = config.mcp_gateway_url or "not set (mcp_gateway_url)"
    gateway = f", gateway {url}" if backend == "loom" else ""
    return f"memory.backend {backend}{gateway} (from {config_dir}); Ctrl-C stops it"


@contextlib.contextmanager
def _existing_state(config: Config, config_dir: Path) -> Iterator[StateStore | None]:
    """The runtime's state file under Loom when it exists, else None; a viewer creates none.

    A file that is there but cannot be used is one line with the status of its fault (75
    busy or full, 73 read-only, 2 damaged; REL-4), as in ``nerve memory status``.
    """
    from provisioner.cli.memory_files import open_state
    from provisioner.config.paths import default_paths

    path = default_paths(config_dir)[1]
    state: StateStore | None = None
    if config.memory_backend == "loom" and path.exists():
        state = open_state(path)
    try:
        yield state
    finally:
        if state is not None:
            state.close()
