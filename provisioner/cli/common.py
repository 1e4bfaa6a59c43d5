"""What every command of the package shares: exit statuses, the one-line usage error, the parser
class, where the workspace and configuration folder are, and the loopback socket that the
local servers (``nerve dev gateway``, ``nerve web``) listen on.

Command modules (``provisioner.cli.*``) import from here, not from ``provisioner.cli.main``,
so the top-level parser can import them without a cycle.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from provisioner.base.command import program
from provisioner.base.errors import UserError
from provisioner.config.paths import CONFIG_DIR_ENV, DEFAULT_CONFIG_DIR, find_folders

if TYPE_CHECKING:
    import socket

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_INCOMPLETE = 1  # SWEEP-13: the gateway answered, but batches did not go through
DEFAULT_WORKSPACE = "~/nerve-workspace"
WORKSPACE_ENV = "NERVE_WORKSPACE"
LOOPBACK = "127.0.0.1"  # the local servers never listen beyond this machine
LISTEN_BACKLOG = 128


class UsageError(UserError):
    """Bad input on the command line or in a file it names; printed as one line."""


class ArgParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and goes through ``UsageError``.

    The line names the subcommand (``init: argument --profile: …``); the ``<command>: error:``
    prefix is the CLI's, printed once. Every subcommand's ``--help`` opens with a sentence:
    its own ``description``, or else its one-line ``help`` made into one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Subcommands)

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(program()).strip()
        raise UsageError(f"{command}: {message}" if command else message)


class _Subcommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Subcommands whose ``--help`` opens with a sentence even when only ``help`` was given."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        summary = kwargs.get("help")
        if kwargs.get("description") is None and isinstance(summary, str) and summary:
            kwargs["description"] = as_sentence(summary)
        return super().add_parser(name, **kwargs)


def as_sentence(summary: str) -> str:
    """``"provision a workspace"`` → ``"Provision a workspace."``: a help line as a sentence."""
    text = summary.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def path_argument(text: str) -> Path:
    """A path flag's value; an empty one is refused (it would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; expected a folder path")
    return Path(text)


def add_workspace_options(command: argparse.ArgumentParser) -> None:
    """``--workspace`` and ``--config-dir``, with the defaults every command shares."""
    command.add_argument(
        "--workspace",
        type=path_argument,
        default=None,
        help=f"workspace folder (default: $NERVE_WORKSPACE or {DEFAULT_WORKSPACE})",
    )
    command.add_argument(
        "--config-dir",
        type=path_argument,
        default=None,
        help="configuration folder (default: as Nerve finds it: $NERVE_CONFIG_DIR, the current "
        f"folder, Nerve's pointer file; else {DEFAULT_CONFIG_DIR})",
    )


def workspace_and_config_dir(args: argparse.Namespace) -> tuple[Path, Path]:
    """The workspace (flag, else environment, else default) and the configuration folder, found
    as Nerve finds it (``provisioner.config.paths.find_folders``, NERVE-7)."""
    workspace = args.workspace or Path(os.environ.get(WORKSPACE_ENV) or DEFAULT_WORKSPACE)
    config_dir = find_folders(args.config_dir).config_dir
    return workspace.expanduser(), config_dir.expanduser()


def port_argument(text: str) -> int:
    """A ``--port`` value: 0 (any free port) to 65535; anything else is refused."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)")
    return port


def listen_on_loopback(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port``, bound before the server's heavy imports.

    A client that connects while the server is still loading (a command started right after
    the server, say) waits in the backlog instead of being refused. The protocol is named
    (``IPPROTO_TCP``, not 0): asyncio turns Nagle's algorithm off only on connections whose
    socket says TCP, and with it on, an answer written as headers then body waits for the
    client's delayed acknowledgement — about 40 ms on every call. A port that cannot be
    taken is a ``UsageError`` naming it.
    """
    import socket  # deferred: only the servers listen

    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((LOOPBACK, port))
        listening.listen(LISTEN_BACKLOG)
    except OSError as error:
        listening.close()
        raise UsageError(f"--port {port}: cannot listen on {LOOPBACK} ({error.strerror})") from None
    return listening


def refuse_missing_folders(args: argparse.Namespace, *, workspace: bool = True) -> None:
    """A ``--workspace`` or ``--config-dir`` that is not a folder is refused (FLEET-4), named
    on the command line or by ``$NERVE_WORKSPACE`` or ``$NERVE_CONFIG_DIR``: a typo would
    otherwise read as an empty configuration, and a monitor would see memU and every check
    passing. The defaults are not checked: a fresh machine has neither folder yet. Every
    command but init calls this (init makes its folders; a sweep, import or migration would
    otherwise write its state into a folder a typo named). ``workspace=False``
    leaves the workspace to the command: doctor reports a missing one as a finding, with the
    init that makes it, and most memory commands read only its settings file, which may be
    absent; ``memory status`` refuses a missing one, as doctor does not pass it.
    """
    named = [("--config-dir", CONFIG_DIR_ENV, args.config_dir)]
    if workspace:
        named.insert(0, ("--workspace", WORKSPACE_ENV, args.workspace))
    for flag, variable, given in named:
        if given is not None:
            shown, path = f"{flag} {given}", Path(given)
        elif os.environ.get(variable, "").strip():
            value = os.environ[variable].strip()
            shown, path = f"{variable}={value}", Path(value)
        else:
            continue
        path = path.expanduser()
        if not path.is_dir():
            what = "not a folder" if path.exists() else "no such folder"
            raise UsageError(f"{shown}: {what}; expected an existing folder")


def gateway_url_argument(text: str) -> str:
    """``--gateway``: a gateway's base URL by ``mcp_gateway_url``'s rule (CONF-6): absolute http
    or https with a host, no user, password, query or fragment; trailing slashes dropped. The
    refusal quotes the value masked, so a token given by mistake is never echoed (REL-14)."""
    from provisioner.config.urls import absolute_http_url, has_credentials, redacted

    value = text.strip()
    parts = absolute_http_url(value)
    if parts is None or has_credentials(parts) or parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(
            f"{redacted(text)} is not a gateway URL; expected an absolute http or https URL "
            "with a host and no credentials, query or fragment, such as http://127.0.0.1:8787"
        )
    return value.rstrip("/")


class Progress:
    """``checked 120/1000 workspaces`` (``switched 120/1000 instances``) rewritten in place, on
    a terminal only (FLEET-1, FLEET-9)."""

    def __init__(self, stream: TextIO, verb: str, noun: str = "workspaces") -> None:
        self.stream = stream
        self.verb = verb
        self.noun = noun
        isatty = getattr(stream, "isatty", None)
        self.shown = bool(isatty and isatty())
        self._written = False

    def __call__(self, done: int, total: int) -> None:
        self.stream.write(f"\r{self.verb} {done}/{total} {self.noun}")
        self.stream.flush()
        self._written = True

    def end(self) -> None:
        if self._written:
            self.stream.write("\n")
            self.stream.flush()
