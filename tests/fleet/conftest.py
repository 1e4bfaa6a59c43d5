"""Workspaces made by real init runs, for the fleet's tests (FLEET-1…FLEET-3).

``provision`` runs ``init`` through the command line's ``main`` in this process, as an
operator's ``nerve-provisioner init --non-interactive`` would; ``older_assets`` is a copy of
the templates as an earlier version of the package shipped them, one sentence of AGENTS.md
shorter, so a test can provision with it and then meet "this version's" wording change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.templating.folder import ASSETS_ENV
from tests.fleet.provisioning import CURRENT_LINE, EARLIER_LINE, Provision, Ran, run_main


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
