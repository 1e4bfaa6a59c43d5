"""The runtime stays light and alone: it never loads the mcp SDK, Copier, Jinja2, PyYAML or
Starlette, and imports nothing of the provisioning rooms (STYLE.md, GW-1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN_IN_RUNTIME = ("mcp", "copier", "jinja2", "yaml", "starlette")


def _modules_after_import(module: str) -> set[str]:
    """Top-level package names in ``sys.modules`` after importing ``module`` in a fresh process."""
    code = (
        "import json, sys\n"
        f"import {module}\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout))


class TestImportBoundaries:
    @pytest.mark.parametrize(
        "module",
        [
            "provisioner.runtime.loom.backend",
            "provisioner.runtime.sweep.sweeper",
            "provisioner.runtime.gateway.client",
        ],
    )
    def test_importing_the_runtime_loads_no_sdk_and_no_template_engine(self, module: str) -> None:
        loaded = _modules_after_import(module)
        assert "httpx" in loaded, "the probe must see the runtime's own dependency"
        assert not loaded & set(FORBIDDEN_IN_RUNTIME)

    @pytest.mark.parametrize(
        "module",
        [
            "provisioner.runtime",
            "provisioner.runtime.memory_contract",
            "provisioner.runtime.errors",
            "provisioner.runtime.loom.recalled",
        ],
    )
    def test_the_shared_modules_import_nothing_heavy(self, module: str) -> None:
        """GW-1, REC-2: the package itself and the modules the provisioning side shares with it
        pull in no HTTP client or template code (the package imports its names on first use)."""
        loaded = _modules_after_import(module)
        assert not loaded & {"httpx", "httpcore", "anyio", *FORBIDDEN_IN_RUNTIME}

    def test_the_runtime_imports_nothing_of_the_provisioning_side(self) -> None:
        """STYLE.md: every module under provisioner/runtime/ imports only provisioner.runtime."""
        import ast
        from pathlib import Path

        import provisioner.runtime

        root = Path(provisioner.runtime.__file__).parent
        sources = sorted(root.rglob("*.py"))
        assert len(sources) > 20, "the probe must see the runtime's sub-packages"
        for source in sources:
            tree = ast.parse(source.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    where = source.relative_to(root)
                    if name.startswith("provisioner"):
                        assert name.startswith("provisioner.runtime"), f"{where} imports {name}"
                    assert name.split(".")[0] not in FORBIDDEN_IN_RUNTIME, f"{where}: {name}"
