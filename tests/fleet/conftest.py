"""Workspaces made by real init runs, for the fleet's tests (FLEET-1…FLEET-3).

``provision`` runs ``init`` through the command line's ``main`` in this process, as an
operator's ``nerve-provisioner init --non-interactive`` would; ``older_assets`` is a copy of
the templates as an earlier version of the package shipped them, one sentence of AGENTS.md
shorter, so a test can provision with it and then meet "this version's" wording change.
"""

from __future__ import annotations

import io
import json
import stat
from collections.abc import Callable, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.templating.folder import ASSETS_ENV

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


@pytest.fixture
def provision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Provision:
    """``provision("ws", "--memory-backend", "loom")``: a real init of ``tmp_path/ws``.

    The configuration folder is ``tmp_path/cfg`` unless ``--config-dir`` is given; the
    environment holds none of the package's variables.
    """
    for name in ("NERVE_MEMORY_BACKEND", "NERVE_LOCKDOWN", ASSETS_ENV, "NERVE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "cfg").mkdir(exist_ok=True)

    def run(workspace: str, *args: str, assets: Path | None = None, check: bool = True) -> Ran:
        with monkeypatch.context() as scoped:
            if assets is not None:
                scoped.setenv(ASSETS_ENV, str(assets))
            argv = ["init", "--non-interactive", "--workspace", str(tmp_path / workspace)]
            if "--config-dir" not in args:
                argv += ["--config-dir", str(tmp_path / "cfg")]
            ran = run_main([*argv, *args])
        if check:
            assert ran.status == 0, (ran.stdout, ran.stderr)
        return ran

    return run


@pytest.fixture
def older_assets(assets_copy: Path) -> Path:
    """The templates as an earlier version shipped them (see the module docstring)."""
    template = assets_copy / "templates" / "workspace" / "AGENTS.md.jinja"
    text = template.read_text(encoding="utf-8")
    assert CURRENT_LINE in text
    template.write_text(text.replace(CURRENT_LINE, EARLIER_LINE), encoding="utf-8")
    return assets_copy
