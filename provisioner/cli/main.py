"""The package's command line: ``nerve-provisioner`` (also ``python -m provisioner``), and
Nerve's ``nerve`` for the groups ``extend_cli`` mounts (NERVE-1).

Every command reports bad input as one line on stderr and exits with status 2, never with a
traceback; ``golden check`` exits 1 when the render drifted from the goldens, and ``diff``
exits 1 when it showed a difference. A template that cannot be rendered is one line naming its
file and line, and exit status 3. The command alone prints the usage. Usage lines, errors and
hints name the command as it was invoked (``provisioner.base.command``).
A file the machine will not let a command use is one line naming it, with its fault's status:
75 busy or full, 73 read-only or permission denied, 74 an I/O error, 2 damaged (REL-4,
docs/exit-status.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence

from provisioner import __version__
from provisioner.base.command import invoked_as, program, running_as
from provisioner.base.counts import counted
from provisioner.base.errors import TemplateBroken
from provisioner.cli.common import (
    EXIT_DIFFERENCE,
    EXIT_OK,
    ArgParser,
    UsageError,
    add_workspace_options,
    path_argument,
    refuse_missing_folders,
    workspace_and_config_dir,
)
from provisioner.runtime.face import EXIT_USAGE, ProvisionerError

# A command imports only what it runs. The command named on the command line is registered
# in full; every other one only by its name and help line, which is all the top-level usage
# and help show. So `--version` and `--help` load no command's code, and `memory …` (the
# runtime's commands) loads neither Copier nor Jinja.
BUILT_IN_COMMANDS = {
    "init": "provision a workspace",
    "render": "render a workspace into a folder for preview",
    "diff": "show how workspace files differ from what init would write",
    "golden": "check or update the frozen renders",
}
# Command groups that live in modules of their own; each has ``register(commands)`` and
# imports what its handlers need only when they run. Each help line is the group's own as
# its module registers it (a test holds them equal).
COMMAND_GROUPS = {
    "memory": (
        "provisioner.cli.memory",
        "recall, status, the extraction sweep and the migration from memU",
    ),
    "dev": ("provisioner.cli.dev", "local tools for trying Nerve with Loom"),
    "doctor": ("provisioner.cli.doctor", "check configuration, workspace and the memory backend"),
    "web": (
        "provisioner.cli.web",
        "serve the Memory page and its Diagnostics card on 127.0.0.1 (needs the web extra)",
    ),
    "fleet": ("provisioner.cli.fleet", "check or update many workspaces at once"),
}
COMMAND_MODULES = tuple(module for module, _help in COMMAND_GROUPS.values())


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line; with ``argv``, only the command it names is registered in full.

    Without ``argv`` (the docs and the tests walk every command) every command is registered
    in full. With it, a command the words do not name is only its name and help line: a
    group's module costs more to import than most commands' own work, and a command never
    needs another's.
    """
    parser = ArgParser(prog=program(), description="Provision Nerve workspaces per memory backend.")
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="show the version"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgParser)
    named = None if argv is None else _command_named(argv)
    built_in = {"init": _add_init, "render": _add_render, "diff": _add_diff, "golden": _add_golden}
    for name, summary in BUILT_IN_COMMANDS.items():
        if argv is None or name == named:
            built_in[name](commands)
        else:
            commands.add_parser(name, help=summary)
    for name, (module_name, summary) in COMMAND_GROUPS.items():
        if argv is None or name == named:
            importlib.import_module(module_name).register(commands)
        else:
            commands.add_parser(name, help=summary)
    return parser


_DATA_HELP = "answer a template question (repeatable), e.g. agent_name=Orbit"


def _add_init(commands: argparse._SubParsersAction) -> None:
    from provisioner.backends import BACKEND_NAMES, PROFILES

    init = commands.add_parser("init", help=BUILT_IN_COMMANDS["init"])
    init.add_argument(
        "--memory-backend",
        choices=BACKEND_NAMES,
        default=None,
        help="word the files for this backend (default: the configuration's memory.backend, "
        "else the workspace's recorded wording, else memu)",
    )
    init.add_argument(
        "--profile", choices=PROFILES, default=None, help="workspace profile (default: personal)"
    )
    add_workspace_options(init)
    modes = init.add_mutually_exclusive_group()
    modes.add_argument(
        "--terminal",
        dest="mode",
        action="store_const",
        const="terminal",
        help="ask every question (default on a terminal)",
    )
    modes.add_argument(
        "--slim",
        dest="mode",
        action="store_const",
        const="slim",
        help="ask only profile, names and timezone",
    )
    modes.add_argument(
        "--non-interactive",
        dest="mode",
        action="store_const",
        const="non-interactive",
        help="ask nothing (default when stdin is not a terminal)",
    )
    init.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", help=_DATA_HELP)
    init.add_argument("--json", action="store_true", help="print the summary as JSON")
    init.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list what init would create, re-word, merge or keep, and exit 1 "
        "when anything would change",
    )
    init.add_argument(
        "--conflict",
        choices=("leave", "inline"),
        default="leave",
        help="an edited file whose template change does not merge cleanly: leave it as it is "
        "(default), or write diff3 markers into it (inline)",
    )
    init.set_defaults(handler=_run_init)


def _add_render(commands: argparse._SubParsersAction) -> None:
    from provisioner.backends import BACKEND_NAMES, PROFILES

    render = commands.add_parser("render", help=BUILT_IN_COMMANDS["render"])
    render.add_argument(
        "--backend", choices=BACKEND_NAMES, default="memu", help="wording (default: memu)"
    )
    render.add_argument(
        "--profile", choices=PROFILES, default=None, help="profile (default: personal)"
    )
    render.add_argument(
        "--out", type=path_argument, required=True, help="a new or empty folder to render into"
    )
    render.add_argument("--data", action="append", default=[], metavar="KEY=VALUE", help=_DATA_HELP)
    render.set_defaults(handler=_run_render)


def _add_diff(commands: argparse._SubParsersAction) -> None:
    from provisioner.backends import BACKEND_NAMES

    diff = commands.add_parser("diff", help=BUILT_IN_COMMANDS["diff"])
    add_workspace_options(diff)
    diff.add_argument(
        "--memory-backend",
        choices=BACKEND_NAMES,
        default=None,
        help="compare with this backend's wording (default: the recorded one)",
    )
    diff.add_argument(
        "paths", nargs="*", metavar="FILE", help="files relative to the workspace (default: all)"
    )
    diff.set_defaults(handler=_run_diff)


_GOLDEN_DIR_HELP = "the golden folder (default: golden/ of this checkout)"


def _add_golden(commands: argparse._SubParsersAction) -> None:
    from provisioner.backends import BACKEND_NAMES

    golden = commands.add_parser("golden", help=BUILT_IN_COMMANDS["golden"])
    actions = golden.add_subparsers(dest="golden_command", required=True, parser_class=ArgParser)
    check = actions.add_parser("check", help="compare a fresh render with golden/")
    check.add_argument("--golden-dir", type=path_argument, default=None, help=_GOLDEN_DIR_HELP)
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(handler=_run_golden_check)
    update = actions.add_parser("update", help="rewrite goldens (memU only when named)")
    update.add_argument("--golden-dir", type=path_argument, default=None, help=_GOLDEN_DIR_HELP)
    update.add_argument(
        "--backend",
        choices=BACKEND_NAMES,
        action="append",
        default=None,
        help="update this backend's goldens (repeatable; protected ones only when named)",
    )
    update.set_defaults(handler=_run_golden_update)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away


def main(argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Run one command; returns the exit status.

    ``prog`` is the command's name in usage lines, errors and hints; by default the name this
    process was invoked with (``nerve-provisioner``, ``python -m provisioner``).
    """
    with running_as(prog or invoked_as(sys.argv[0] if sys.argv else None)):
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        if getattr(args, "handler", None) is None:  # a group such as `nerve golden` alone
            raise UsageError(
                f"{args.command}: expected a subcommand; see {program()} {args.command} -h"
            )
        return int(args.handler(args))
    except ProvisionerError as error:
        # Every error the package raises on purpose is one line and its own exit status: 2 for
        # input, 3 for a template (GOLD-2), 75/73/74/2 for a file by its fault (REL-4).
        what = "template error" if isinstance(error, TemplateBroken) else "error"
        print(f"{program()}: {what}: {_one_line(error)}", file=sys.stderr)
        return error.exit_status
    except KeyboardInterrupt:
        print(f"{program()}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`doctor --json | head`): stop quietly, as a shell tool
        # does, and keep Python from reporting the same error again when it flushes stdout.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except OSError as error:
        # An OSError that names its file and is a fault of the machine (full, read-only,
        # permission, I/O) is one line with its status (REL-4); anything else is a bug.
        from provisioner.runtime.face import file_fault  # deferred: sqlite3

        named = file_fault(error, error.filename) if error.filename else None
        if named is None:
            raise
        print(f"{program()}: error: {_one_line(named)}", file=sys.stderr)
        return named.exit_status


def _command_named(argv: Sequence[str] | None) -> str | None:
    """The first word of ``argv`` that is not an option: the command asked for."""
    return next((word for word in argv or () if not word.startswith("-")), None)


def _one_line(error: Exception) -> str:
    """The error as one line, no URL's credentials in it (REL-14)."""
    from provisioner.runtime.face import masked

    return masked(" ".join(str(error).split("\n")))


def _data(pairs: Sequence[str]) -> dict[str, str]:
    data: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--data {pair!r}: expected KEY=VALUE")
        data[key.strip()] = value
    return data


def _run_init(args: argparse.Namespace) -> int:
    from provisioner.cli.summary import init_summary_json, init_summary_text
    from provisioner.workspace.init import InitWorker, Prompter

    workspace, config_dir = workspace_and_config_dir(args)
    mode = args.mode or ("terminal" if sys.stdin.isatty() else "non-interactive")
    if args.check:  # FLEET-2: asks nothing, writes nothing
        mode = "non-interactive"
    prompter = None
    if mode != "non-interactive":
        prompter = Prompter(sys.stdin, sys.stderr, _secret_reader())
    worker = InitWorker(
        workspace=workspace,
        config_dir=config_dir,
        mode=mode,
        backend=args.memory_backend,
        profile=args.profile,
        data=_data(args.data),
        env=dict(os.environ),
        prompter=prompter,
        check=args.check,
        conflict=args.conflict,
    )
    result = worker.run()
    for warning in result.warnings:
        print(f"{program()}: warning: {warning}", file=sys.stderr)
    if args.check:
        from provisioner.cli.init_check import print_check

        return print_check(result, config_dir, as_json=args.json)
    if args.json:
        print(json.dumps(init_summary_json(result, config_dir), indent=2))
    else:
        print(init_summary_text(result, config_dir), end="")
    return EXIT_OK


def _secret_reader():  # type: ignore[no-untyped-def]
    """getpass on a terminal (no echo); plain lines when answers are piped in."""
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass
    return None


def _run_render(args: argparse.Namespace) -> int:
    from provisioner.workspace.previews import render_preview

    written, warnings = render_preview(args.backend, args.profile, args.out, _data(args.data))
    for warning in warnings:
        print(f"{program()}: warning: {warning}", file=sys.stderr)
    print(f"rendered {counted(len(written), 'file')} ({args.backend}) into {args.out}")
    return EXIT_OK


def _run_diff(args: argparse.Namespace) -> int:
    from provisioner.workspace.previews import workspace_diff

    refuse_missing_folders(args)  # FLEET-4: diff only reads both folders
    workspace, _config_dir = workspace_and_config_dir(args)
    output, differs = workspace_diff(workspace, args.memory_backend, args.paths)
    sys.stdout.write(output)
    return EXIT_DIFFERENCE if differs else EXIT_OK


def _run_golden_check(args: argparse.Namespace) -> int:
    from provisioner.cli.summary import golden_report_json, golden_report_text, wants_colour
    from provisioner.golden import check as golden
    from provisioner.golden.advice import acceptance
    from provisioner.golden.source import template_source

    golden_dir = golden.usable_golden_dir(
        args.golden_dir or golden.default_golden_dir(), must_exist=True
    )
    source = template_source(golden_dir)
    with source.active():
        report = golden.check(golden_dir)
    advice = acceptance(report, golden_dir_option=args.golden_dir, env=os.environ)
    if args.json:
        print(json.dumps(golden_report_json(report, source=source, advice=advice), indent=2))
    else:
        colour = wants_colour(sys.stdout, os.environ)
        sys.stdout.write(golden_report_text(report, source=source, advice=advice, colour=colour))
    return EXIT_OK if report.ok else EXIT_DIFFERENCE


def _run_golden_update(args: argparse.Namespace) -> int:
    """Update the backends named, else every backend not protected by name (GOLD-3).

    It also checks every backend it left alone and says in one line what is left there; the
    exit status is 1 while a check would still fail, as the check's is, whether or not
    backends were named (``--backend loom`` while memU's goldens differ: 1).
    """
    from provisioner.backends import BACKEND_NAMES, BACKENDS
    from provisioner.golden import check as golden
    from provisioner.golden.advice import left_line
    from provisioner.golden.source import template_source

    protected = [name for name, entry in BACKENDS.items() if entry.goldens.by_name_only]
    backends = args.backend or [name for name in BACKEND_NAMES if name not in protected]
    also_check = [name for name in BACKEND_NAMES if name not in backends]
    golden_dir = args.golden_dir or golden.default_golden_dir()
    source = template_source(golden_dir)
    with source.active():
        result = golden.apply_update(golden_dir, backends, env=os.environ, also_check=also_check)
    for path in result.touched:
        print(f"updated {path}")
    count = len(result.touched)
    print(
        f"{count} golden file{'' if count == 1 else 's'} updated for {', '.join(backends)} "
        f"from {source.describe()}"
    )
    left = left_line(result.left, args.golden_dir)
    if left:
        print(left)
        return EXIT_DIFFERENCE
    return EXIT_OK
