"""What the fleet's tests provision with: ``init`` run through the command line's ``main`` in
this process, the files a workspace holds, and the line an agent adds of its own."""

from __future__ import annotations

import io
import json
import stat
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from provisioner.cli.main import main

# The sentence "this version" added to AGENTS.md; the earlier version ended the line early.
CURRENT_LINE = "This guide says where things live and how you keep what you learn."
EARLIER_LINE = "This guide says where things live."
AGENT_LINE = "Agent's own note: answer in short paragraphs."


@dataclass
class Ran:
    """A command run through ``main``: its status and what it printed."""

    status: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def run_main(argv: Sequence[str]) -> Ran:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(list(argv))
    return Ran(status, out.getvalue(), err.getvalue())


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file below ``root``: bytes and exec bit, by relative path."""
    return {
        path.relative_to(root).as_posix(): (
            path.read_bytes(),
            bool(path.stat().st_mode & stat.S_IXUSR),
        )
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def add_agent_line(path: Path, before: str = "| File | What it holds |\n") -> None:
    """An agent's edit: one line of its own, far from the lines a backend switch re-words."""
    text = path.read_text(encoding="utf-8")
    assert before in text
    path.write_text(text.replace(before, f"{AGENT_LINE}\n\n{before}", 1), encoding="utf-8")


Provision = Callable[..., Ran]
