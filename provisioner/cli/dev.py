"""``nerve dev gateway``: a local stand-in for the MCP gateway with Loom behind it.

The server lives in ``provisioner.devgateway`` and needs the ``dev`` extra; it is imported only
when the command runs, so ``nerve --help`` stays fast and an install without the extra gets
one line saying how to add it. ``nerve dev gateway --help`` lists the fault names, read from
``provisioner.devgateway.faults.FAULT_NAMES`` only while that help is shown.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

from provisioner.base.command import command
from provisioner.cli.common import (
    EXIT_OK,
    LOOPBACK,
    ArgParser,
    UsageError,
    listen_on_loopback,
    port_argument,
)

DEFAULT_PORT = 8787  # contracts/gateway.md's example base URL
DEV_EXTRA_HINT = "pip install 'nerve-provisioner[dev]'"
DEV_EXTRA_MODULES = frozenset({"mcp", "mcp_types", "uvicorn", "starlette", "jsonschema"})


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``nerve dev`` and its ``gateway`` subcommand."""
    dev = commands.add_parser("dev", help="local tools for trying Nerve with Loom")
    actions = dev.add_subparsers(dest="dev_command", required=True, parser_class=ArgParser)
    gateway = actions.add_parser(
        "gateway",
        help="serve a local MCP gateway with a Loom stand-in (needs the dev extra)",
        description="Serve GET /catalog and Loom's tools at /s/loom/mcp on 127.0.0.1.",
        formatter_class=_FaultNamesHelp,
    )
    gateway.add_argument(
        "--port",
        type=port_argument,
        default=DEFAULT_PORT,
        help="port (0: any free one; default 8787)",
    )
    gateway.add_argument("--seed", type=int, default=0, help="seed of the per-call fault draw")
    gateway.add_argument(
        "--faults",
        default="",
        metavar="SPEC",
        help="fault rules NAME[:ARG][@TOOL][=PROBABILITY], comma-separated (e.g. 503=0.2)",
    )
    gateway.add_argument(
        "--data", type=str, default=None, metavar="DIR", help="keep memories in DIR"
    )
    gateway.add_argument(
        "--older-memory-set",
        action="store_true",
        help="serve loom_memory_set as an older Loom does: without kind, tags and dates "
        "(in tools/list, and a write sending one is refused)",
    )
    gateway.add_argument(
        "--answers",
        choices=("json", "sse", "mixed"),
        default="mixed",
        help="answer as JSON, as event streams, or either per call (default)",
    )
    gateway.set_defaults(handler=_run_gateway)


class _FaultNamesHelp(argparse.HelpFormatter):
    """The gateway's help, with the fault names after ``--faults``' own line.

    The names come from the fault module, which needs the dev extra; they are read only when
    the whole help is formatted (never while the parser is built, nor for a usage line), so
    ``nerve --help`` imports nothing of the dev gateway. Without the extra the help says how
    to add it instead of the names.
    """

    def add_argument(self, action: argparse.Action) -> None:
        if action.dest == "faults" and action.help:
            action = copy.copy(action)
            action.help = f"{action.help}; faults: {_fault_names()}"
        super().add_argument(action)


def _fault_names() -> str:
    """The faults as rules write them (``coded[:CODE]``), or how to get the dev extra."""
    try:
        from provisioner.devgateway.faults import fault_usage
    except ImportError as error:
        if (error.name or "").split(".")[0] not in DEV_EXTRA_MODULES:
            raise
        return f"listed once the dev extra is installed ({DEV_EXTRA_HINT})"
    return ", ".join(fault_usage())


def _run_gateway(args: argparse.Namespace) -> int:
    listening = listen_on_loopback(args.port)
    with listening:
        try:
            from provisioner.devgateway.faults import FaultSpecError, parse_fault_spec
            from provisioner.devgateway.serve import serve_forever
        except ImportError as error:
            if (error.name or "").split(".")[0] not in DEV_EXTRA_MODULES:
                raise
            raise UsageError(
                f"{command('dev gateway')} needs the dev extra ({error.name} is missing): "
                f"{DEV_EXTRA_HINT}"
            ) from None
        try:
            parse_fault_spec(args.faults)
        except FaultSpecError as error:
            raise UsageError(f"--faults: {error}") from None
        data_dir = _data_dir(args.data)
        port = listening.getsockname()[1]
        serve_forever(
            listening,
            seed=args.seed,
            faults=args.faults,
            data_dir=data_dir,
            answers=args.answers,
            older_memory_set=args.older_memory_set,
            ready=lambda: print(f"mcp_gateway_url: http://{LOOPBACK}:{port}", flush=True),
        )
    return EXIT_OK


def _data_dir(text: str | None) -> Path | None:
    """The folder for the stand-in's memories (created), or None to keep them in memory."""
    if not text:
        return None
    folder = Path(text).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"--data {text}: cannot use it as a folder ({error.strerror})") from None
    return folder
