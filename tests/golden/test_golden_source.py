"""Which templates ``nerve golden check|update`` render (OPS-1).

A checkout's goldens are compared with that checkout's ``templates/`` and ``skills/``, however
the package is installed. The order is tried in process on folders shaped like checkouts, and
end to end in a real venv holding a plain (non-editable) install of a copy of this checkout.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.golden.source import (
    FROM_CHECKOUT,
    FROM_ENVIRONMENT,
    FROM_INSTALL,
    template_source,
)
from provisioner.templating.folder import active_folder
from tests.golden.test_golden import nerve, replace_once
from tests.support.processes import assert_one_line_error, clean_environment
from tests.support.repo import REPO_ROOT

PYPROJECT = '[project]\nname = "nerve-provisioner"\n'  # what makes a folder a checkout


def fake_checkout(root: Path, *, skills: bool = True) -> Path:
    """A folder the golden commands take for a checkout: pyproject, golden/, templates/."""
    (root / "golden").mkdir(parents=True)
    (root / "templates").mkdir()
    (root / "templates" / "copier.yml").write_text("{}\n", encoding="utf-8")
    if skills:
        (root / "skills").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    return root


class TestWhichFolderIsRendered:
    def test_the_checkout_a_golden_folder_belongs_to_is_rendered(self, tmp_path):
        """OPS-1: `--golden-dir A/golden` run from checkout B renders A, whose goldens they are."""
        first, second = fake_checkout(tmp_path / "a"), fake_checkout(tmp_path / "b")
        source = template_source(first / "golden", env={}, cwd=second)
        assert (source.root, source.origin) == (first.resolve(), FROM_CHECKOUT)

    def test_a_golden_folder_outside_any_checkout_renders_the_current_folders_checkout(
        self, tmp_path
    ):
        """OPS-1: a golden copy to try an update on is compared with the author's templates."""
        checkout = fake_checkout(tmp_path / "checkout")
        (checkout / "templates" / "workspace").mkdir()
        source = template_source(
            tmp_path / "copy" / "golden", env={}, cwd=checkout / "templates" / "workspace"
        )
        assert (source.root, source.origin) == (checkout.resolve(), FROM_CHECKOUT)

    def test_nerve_assets_dir_comes_before_any_checkout(self, tmp_path):
        """OPS-1: a working copy named on purpose is what gets rendered."""
        checkout = fake_checkout(tmp_path / "checkout")
        elsewhere = fake_checkout(tmp_path / "elsewhere")
        env = {"NERVE_ASSETS_DIR": str(elsewhere)}
        source = template_source(checkout / "golden", env=env, cwd=checkout)
        assert (source.root, source.origin) == (elsewhere.resolve(), FROM_ENVIRONMENT)

    def test_with_no_checkout_anywhere_the_installed_package_is_rendered(self, tmp_path):
        """OPS-1: outside a checkout only the installed copy is left, and it is named so."""
        source = template_source(tmp_path / "golden", env={}, cwd=tmp_path)
        assert (source.root, source.origin) == (active_folder().root, FROM_INSTALL)

    def test_a_checkout_without_skills_is_refused_in_one_line(self, tmp_path):
        """OPS-1: never half the checkout's render and half the installed copy's."""
        checkout = fake_checkout(tmp_path / "checkout", skills=False)
        result = nerve(tmp_path / "home", "golden", "check", cwd=checkout)
        assert_one_line_error(result, str(checkout.resolve()), "no skills/")


# --- a plain `pip install .` -------------------------------------------------------------------

CHECKOUT_PARTS = (
    "pyproject.toml",
    "README.md",
    "provisioner",
    "templates",
    "skills",
    "golden",
    "tests/fixtures/loom_lifecycle_ops.json",
)  # what building the wheel and checking the goldens read


def copy_checkout(target: Path) -> Path:
    """The parts of this checkout a wheel is built from, and its goldens, at ``target``."""
    for part in CHECKOUT_PARTS:
        source, copy = REPO_ROOT / part, target / part
        if source.is_dir():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return target


def run(command: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess:
    home.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        command,
        input="",
        capture_output=True,
        text=True,
        env=clean_environment(home),
        cwd=cwd,
        timeout=300,
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A venv with a non-editable install of a copy of this checkout, and runs of its command.

    In the copy: the goldens are first brought in line with its templates (so the tree's
    state does not matter), checked, then a memU partial is edited and the check runs again,
    then the memU update and a last check. A copy of the goldens outside any checkout is
    checked before and after the edit.
    """
    root = tmp_path_factory.mktemp("installed")
    home = root / "home"
    checkout = copy_checkout(root / "checkout")
    venv = root / "venv"
    made = run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        root,
        home,
    )
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    built = run([*pip, "--no-deps", "--no-build-isolation", str(checkout)], root, home)
    assert built.returncode == 0, built.stdout + built.stderr
    nerve_command = str(venv / "bin" / "nerve-provisioner")
    runs: dict = {"checkout": checkout, "venv": venv}
    runs["where"] = run(
        [str(python), "-c", "import provisioner; print(provisioner.__file__)"], root, home
    )
    runs["sync"] = run(
        [nerve_command, "golden", "update", "--backend", "memu", "--backend", "loom"],
        checkout,
        home,
    )
    runs["pristine"] = run([nerve_command, "golden", "check", "--json"], checkout, home)
    elsewhere = root / "elsewhere"
    shutil.copytree(checkout / "golden", elsewhere / "golden")
    outside = [nerve_command, "golden", "check", "--json", "--golden-dir", "golden"]
    runs["outside_before"] = run(outside, elsewhere, home)
    replace_once(checkout / "templates/partials/memu/agents-memory.md", "two kinds", "two kindz")
    runs["edited"] = run([nerve_command, "golden", "check"], checkout, home)
    runs["edited_below"] = run([nerve_command, "golden", "check"], checkout / "skills", home)
    runs["outside_after"] = run(outside, elsewhere, home)
    runs["update"] = run([nerve_command, "golden", "update", "--backend", "memu"], checkout, home)
    runs["after_update"] = run([nerve_command, "golden", "check"], checkout, home)
    return runs


@pytest.mark.slow
class TestANonEditableInstall:
    def test_the_command_runs_the_installed_copy_not_the_checkout(self, installed):
        """OPS-1: the scenario of the issue: the package imported is the one pip installed."""
        assert installed["where"].returncode == 0, installed["where"].stderr
        imported = Path(installed["where"].stdout.strip())
        assert imported.is_relative_to(installed["venv"]), imported
        assert (imported.parent / "_assets" / "templates" / "copier.yml").is_file()

    def test_a_template_edit_in_the_checkout_fails_its_check_naming_the_folder(self, installed):
        """OPS-1: the check renders the checkout's templates, not the copy pip installed."""
        sync = installed["sync"]
        assert sync.returncode == 0, sync.stdout + sync.stderr
        assert json.loads(installed["pristine"].stdout)["ok"] is True
        result = installed["edited"]
        assert result.returncode == 1, result.stdout + result.stderr
        assert "CHANGED  memu/personal/AGENTS.md (bytes differ)\n" in result.stdout
        assert "\n+You have two kindz of memory.\n" in result.stdout
        assert f" from {installed['checkout']} (checkout)\n" in result.stdout
        assert "accept with: nerve-provisioner golden update --backend memu\n" in result.stdout

    def test_a_subfolder_of_the_checkout_renders_the_same_checkout(self, installed):
        """OPS-1: the checkout is found from the current folder, wherever in it."""
        result = installed["edited_below"]
        assert result.returncode == 1, result.stdout + result.stderr
        assert f" from {installed['checkout']} (checkout)\n" in result.stdout

    def test_update_writes_the_edit_into_the_checkouts_goldens(self, installed):
        """OPS-1, GOLD-3: update renders the same templates the check did, so it accepts them."""
        assert installed["update"].returncode == 0, installed["update"].stderr
        assert "updated memu/personal/AGENTS.md\n" in installed["update"].stdout
        golden = installed["checkout"] / "golden/memu/personal/AGENTS.md"
        assert "You have two kindz of memory." in golden.read_text(encoding="utf-8")
        assert installed["after_update"].returncode == 0, installed["after_update"].stdout

    def test_outside_a_checkout_the_installed_copy_is_rendered_and_named(self, installed):
        """OPS-1: with no checkout around, the installed templates are what there is, said so."""
        for name in ("outside_before", "outside_after"):
            report = json.loads(installed[name].stdout)
            assert report["ok"] is True, (name, report["differences"][:2])
            assert report["rendered_from_origin"] == "installed package"
            assert Path(report["rendered_from"]).is_relative_to(installed["venv"])
