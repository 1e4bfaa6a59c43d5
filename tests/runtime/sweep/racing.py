"""What the processes of ``test_state_concurrency`` run: kept apart from the test module so that
a child process imports no pytest, only this and the package (preloaded by the fork server).

Every function here is the target of a ``multiprocessing`` process. Each waits at a barrier
shared with the other processes of its round, so they all open the same new file together,
then reports what happened: through a queue, or through its exit status and the output files
it writes, which hold any traceback the child met.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

# Modules a child would otherwise import on its own, each of the two hundred times; the fork
# server loads them once. Any one missing (an optional dependency) is skipped by the server.
PRELOAD = (
    "provisioner.cli.main",
    "provisioner.cli.doctor",
    "provisioner.cli.memory",
    "provisioner.cli.memory_files",
    "provisioner.cli.memory_recall",
    "provisioner.config.loader",
    "provisioner.doctor.run",
    "provisioner.doctor.config",
    "provisioner.doctor.memory",
    "provisioner.doctor.sweep",
    "provisioner.doctor.workspace",
    "provisioner.templating.jinja_env",
    "provisioner.workspace.render",
    "provisioner.runtime.loom.backend",
    "provisioner.runtime.state",
    "provisioner.runtime.sweep.sweeper",
    "provisioner.templating.texts",
    "anyio._backends._asyncio",
    "httpcore",
    "h11",
    "jinja2",
    "trio",
    "tests.runtime.sweep.racing",
)
BARRIER_TIMEOUT_S = 120.0  # only a child that never started leaves the others waiting this long


def open_state_store(path: str, results: Queue, barrier: Barrier) -> None:
    """Open the state file at ``path`` once the whole round is ready; report its version.

    Puts ``("opened", version)`` or ``("failed", "Type: message")`` on ``results``.
    """
    from provisioner.runtime.state import StateStore
    from tests.support.state_sql import state_rows

    barrier.wait(BARRIER_TIMEOUT_S)
    try:
        with StateStore(path) as store:
            version = state_rows(store, "PRAGMA user_version")[0][0]
    except Exception as error:  # the test shows whatever it was
        results.put(("failed", f"{type(error).__name__}: {error}"))
        return
    results.put(("opened", version))


def run_cli(argv: list[str], output: str, environment: dict[str, str], barrier: Barrier) -> None:
    """Run ``nerve ARGV`` (the same ``main`` as ``python -m provisioner``) once the round is ready.

    Its stdout and stderr go to ``OUTPUT.out`` and ``OUTPUT.err`` — a traceback included, since
    an exception that escapes ``main`` is printed to stderr by the process — and its exit
    status is the command's.
    """
    for descriptor, suffix in ((1, ".out"), (2, ".err")):
        target = os.open(output + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, descriptor)
        os.close(target)
    os.environ.update(environment)
    from provisioner.cli.main import main

    barrier.wait(BARRIER_TIMEOUT_S)
    status = main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(status)


def read_output(output: str) -> tuple[str, str]:
    """The stdout and stderr ``run_cli`` wrote for ``output``."""
    return (
        Path(output + ".out").read_text(encoding="utf-8", errors="replace"),
        Path(output + ".err").read_text(encoding="utf-8", errors="replace"),
    )
