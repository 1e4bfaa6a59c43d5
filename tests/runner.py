"""The command line run in this process: ``main(argv)`` as ``python -m provisioner`` would run.

Starting a Python process costs about a third of a second, and most CLI tests are about what
a command prints, writes and exits with, not about being a process. ``run_cli`` runs
``provisioner.cli.main.main`` here, as a fresh process would: in the folder and with the
environment given (the environment replaced whole, as ``subprocess.run(env=...)`` does), stdin
fed from a string and never a terminal, stdout and stderr captured as bytes and read back as
``subprocess.run(text=True)`` reads a child's output. Whatever the command changes of the
process — the working folder, the environment, signal handlers, loggers — is put back when
it returns, so the next test meets the process as it was. Nothing else needs putting back: a
template folder the command read is held by the command, not remembered by the package.

What it does not stand in for: signals, a terminal, locks held across processes, ``kill -9``
and installing. Tests about those start a real process.

A command that raises instead of returning a status is reported as Python reports it: the
traceback on stderr and status 1, so a test asserting "no traceback" still catches it.
``SystemExit`` (argparse's ``--help``, ``--version`` and usage errors) becomes its status.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from provisioner.base.command import MODULE_COMMAND
from provisioner.cli.main import main

_ENCODING = "utf-8"


def run_cli(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    prog: str = MODULE_COMMAND,
) -> subprocess.CompletedProcess[str]:
    """Run the command line ``argv`` in this process; its status and what it printed.

    ``cwd`` and ``env`` default to the test process's own; ``input`` is stdin (empty unless
    given). ``prog`` is the name usage lines and hints give the command: ``python -m
    provisioner`` unless told, as the tests that started a process named it. The result is a
    ``CompletedProcess`` whose ``args`` are ``prog``'s words followed by ``argv``.
    """
    encoding, errors = _io_encoding(os.environ if env is None else env)
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode(_ENCODING)), encoding=encoding)
    stdout_bytes, stderr_bytes = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(
        stdout_bytes, encoding=encoding, errors=errors or "strict", write_through=True
    )
    stderr = io.TextIOWrapper(
        stderr_bytes, encoding=encoding, errors="backslashreplace", write_through=True
    )
    with (
        _folder(cwd),
        _environment(env),
        _kept_signal_handlers(),
        _kept_loggers(),
        _streams(stdin, stdout, stderr),
    ):
        status = _status_of(argv, prog)
    stdout.flush()
    stderr.flush()
    return subprocess.CompletedProcess(
        [*prog.split(), *argv], status, _as_text(stdout_bytes), _as_text(stderr_bytes)
    )


def _status_of(argv: Sequence[str], prog: str) -> int:
    """``main``'s status; ``SystemExit`` as the interpreter turns it into one; an uncaught
    exception as the interpreter reports it."""
    try:
        return main(list(argv), prog=prog)
    except SystemExit as done:
        if done.code is None:
            return 0
        if isinstance(done.code, int):
            return done.code
        print(done.code, file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc(file=sys.stderr)
        return 1


def _io_encoding(env: Mapping[str, str]) -> tuple[str, str | None]:
    """The standard streams' encoding and error handler a fresh interpreter would take from
    ``PYTHONIOENCODING`` (``encoding[:errors]``), else UTF-8."""
    named, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    return named or _ENCODING, errors or None


def _as_text(data: io.BytesIO) -> str:
    """The bytes read back as ``subprocess.run(text=True)`` reads them (universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(data.getvalue()), encoding=_ENCODING).read()


@contextmanager
def _folder(cwd: Path | None) -> Iterator[None]:
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    before = dict(os.environ)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(before)


@contextmanager
def _kept_signal_handlers() -> Iterator[None]:
    before: dict[signal.Signals, Any] = {}
    for number in signal.valid_signals():
        try:
            before[signal.Signals(number)] = signal.getsignal(number)
        except (ValueError, OSError):
            continue
    try:
        yield
    finally:
        for number, handler in before.items():
            if handler is not None and signal.getsignal(number) is not handler:
                signal.signal(number, handler)


@contextmanager
def _kept_loggers() -> Iterator[None]:
    """Loggers as they were; while the command runs, the root logger has no handler, so a
    warning reaches stderr through logging's last resort as in a fresh process (the test
    runner's own capture would otherwise take it)."""
    manager = logging.Logger.manager
    loggers = [logging.getLogger()] + [
        logger for logger in manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    before = [
        (logger, logger.level, list(logger.handlers), logger.disabled, logger.propagate)
        for logger in loggers
    ]
    root = logging.getLogger()
    root.handlers = []
    try:
        yield
    finally:
        for logger, level, handlers, disabled, propagate in before:
            logger.setLevel(level)
            logger.handlers = handlers
            logger.disabled = disabled
            logger.propagate = propagate


@contextmanager
def _streams(
    stdin: io.TextIOWrapper, stdout: io.TextIOWrapper, stderr: io.TextIOWrapper
) -> Iterator[None]:
    before = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = before
