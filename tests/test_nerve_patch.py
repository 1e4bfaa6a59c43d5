"""The adoption patch and its page agree, and the patch fits Nerve (NERVE-18).

``patches/nerve-adoption.patch`` is what a Nerve maintainer applies; docs/nerve-adoption.md
shows every line it adds and states how many. These tests read both files, and, where Nerve's
source is beside the checkout, ask ``git apply --check`` whether the patch still applies.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.integrations import nerve as host_api
from tests.support.repo import REPO_ROOT

PATCH = REPO_ROOT / "patches" / "nerve-adoption.patch"
PAGE = REPO_ROOT / "docs" / "nerve-adoption.md"
MOST_LINES_OF_NERVE_CODE = 40  # NERVE-18: the patch adds at most this many lines of Python


def added_lines_by_file() -> dict[str, list[str]]:
    """Every line the patch adds, by the file it adds it to."""
    added: dict[str, list[str]] = {}
    current = ""
    for line in PATCH.read_text(encoding="utf-8").splitlines():
        if line.startswith("+++ "):
            current = line.removeprefix("+++ b/")
        elif line.startswith("+") and not line.startswith("+++"):
            added.setdefault(current, []).append(line[1:])
    return added


def page_code() -> str:
    return "\n".join(re.findall(r"```\w*\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S))


class TestThePatchAndItsPage:
    def test_every_line_the_patch_adds_is_shown_on_the_page(self) -> None:
        shown = set(page_code().splitlines())
        missing = [
            f"{name}: {line}"
            for name, lines in added_lines_by_file().items()
            for line in lines
            if line.strip() and line not in shown
        ]
        assert missing == []

    def test_the_page_states_the_patchs_count_of_nerve_code_within_the_target(self) -> None:
        python = {
            name: [line for line in lines if line.strip()]
            for name, lines in added_lines_by_file().items()
            if name.endswith(".py")
        }
        total = sum(len(lines) for lines in python.values())
        stated = re.search(r"adds \*\*(\d+) lines of Nerve code\*\*", PAGE.read_text("utf-8"))
        assert stated is not None and int(stated.group(1)) == total
        assert total <= MOST_LINES_OF_NERVE_CODE
        for name, lines in python.items():
            assert f"{Path(name).name} {len(lines)}" in PAGE.read_text("utf-8"), name

    def test_every_name_the_patch_imports_from_the_package_is_in_the_host_api(self) -> None:
        imported = re.findall(
            r"^\+from provisioner\.integrations\.nerve import (.+)$",
            PATCH.read_text(encoding="utf-8"),
            re.M,
        )
        names = {name.strip() for line in imported for name in line.split(",")}
        assert names and names <= set(host_api.__all__)


def nerve_source() -> Path:
    return REPO_ROOT.parent / "shared" / "nerve"


@pytest.mark.skipif(not (nerve_source() / "nerve").is_dir(), reason="no Nerve source beside")
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_patch_applies_to_nerves_source(tmp_path: Path) -> None:
    copy = tmp_path / "nerve"
    shutil.copytree(nerve_source(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        ["git", "apply", "--check", str(PATCH)], cwd=copy, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
