"""The golden check and update (GOLD-1…GOLD-4, GOLD-6), driven through the real ``nerve``.

Changes are planted in private copies of the templates (``NERVE_ASSETS_DIR``) and of
``golden/``, never in the checkout. Each ``nerve golden`` process renders every workspace and
text, so the scenarios that several tests read run once per module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from provisioner.backends import BACKEND_NAMES, PROFILES
from provisioner.golden.check import Difference, compare, read_goldens, render_expected
from provisioner.templating.jobs import unrecorded_memu_prompts
from provisioner.templating.texts import all_texts
from provisioner.workspace.diff import CR_MARK, NO_NEWLINE, structural_summary, unified_diff
from provisioner.workspace.render import RenderedFile
from tests.runner import run_cli
from tests.support.processes import assert_one_line_error, clean_environment
from tests.support.repo import GOLDEN_DIR, REPO_ROOT

SHIPPED_PROMPTS = REPO_ROOT / "templates" / "shipped-memu-prompts.json"
_HEADLINE = re.compile(r"^(CHANGED|MODE|MISSING|ORPHAN|UNRECORDED)\s+(.+?) \(")

Snapshot = dict[str, tuple[bytes, int, int]]


# --- helpers -------------------------------------------------------------------------------


def copy_assets(target: Path) -> Path:
    """A private copy of templates/ and skills/, for ``NERVE_ASSETS_DIR``."""
    shutil.copytree(REPO_ROOT / "templates", target / "templates")
    shutil.copytree(REPO_ROOT / "skills", target / "skills")
    return target


def replace_once(path: Path, old: str, new: str) -> None:
    """Plant a change; fails loudly when the template no longer holds ``old`` exactly once."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


def nerve(
    home: Path, *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """``python -m provisioner …`` with a clean environment (module-scoped scenarios), run in
    this process (``tests.runner``)."""
    home.mkdir(parents=True, exist_ok=True)
    return run_cli(args, env=clean_environment(home, env), cwd=cwd or home)


def snapshot(root: Path) -> Snapshot:
    """Bytes, mtime and mode of every file and folder below ``root``."""
    state: Snapshot = {}
    for folder, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            path = Path(folder) / name
            info = path.lstat()
            content = path.read_bytes() if path.is_file() else b""
            state[path.relative_to(root).as_posix()] = (content, info.st_mtime_ns, info.st_mode)
    return state


def headlines(output: str) -> set[tuple[str, str]]:
    """The (kind, golden path) of every difference the text report names."""
    return {
        (match[1], match[2]) for line in output.splitlines() if (match := _HEADLINE.match(line))
    }


def section(output: str, kind: str, path: str) -> str:
    """The report's lines for one difference: its headline and its detail."""
    lines: list[str] = []
    inside = False
    for line in output.splitlines():
        match = _HEADLINE.match(line)
        if match or line.startswith(("WORDING", "golden check:")):
            inside = bool(match) and (match[1], match[2]) == (kind, path)
        if inside:
            lines.append(line)
    assert lines, f"no {kind} section for {path} in:\n{output}"
    return "\n".join(lines) + "\n"


# --- GOLD-4 --------------------------------------------------------------------------------


class TestCheckOnTheCheckout:
    def test_golden_check_passes_on_the_checkout_as_it_is(self, run_nerve):
        """GOLD-4: the suite runs the real check on the committed goldens, so drift fails CI."""
        result = run_nerve("golden", "check", cwd=REPO_ROOT)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "match golden/" in result.stdout


# --- GOLD-2: one change -------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_byte_change(tmp_path_factory) -> subprocess.CompletedProcess:
    """``golden check`` after one byte of memU's AGENTS.md wording changed ("kinds" to "kindz")."""
    root = tmp_path_factory.mktemp("one-byte")
    assets = copy_assets(root / "assets")
    replace_once(assets / "templates/partials/memu/agents-memory.md", "two kinds", "two kindz")
    goldens = root / "golden"
    shutil.copytree(GOLDEN_DIR, goldens)
    return nerve(
        root / "home",
        "golden",
        "check",
        "--golden-dir",
        str(goldens),
        env={"NERVE_ASSETS_DIR": str(assets)},
    )


class TestCheckOfOneByteChange:
    def test_a_one_byte_change_to_a_memu_partial_fails_with_a_diff_of_the_changed_line(
        self, one_byte_change
    ):
        """GOLD-2: changing one byte of memU wording is caught, shown where it lands."""
        assert one_byte_change.returncode == 1, one_byte_change.stdout + one_byte_change.stderr
        diff = section(one_byte_change.stdout, "CHANGED", "memu/personal/AGENTS.md")
        assert "--- golden/memu/personal/AGENTS.md\n" in diff
        assert "+++ rendered/memu/personal/AGENTS.md\n" in diff
        assert "\n-You have two kinds of memory.\n" in diff
        assert "\n+You have two kindz of memory.\n" in diff

    def test_a_one_byte_change_to_a_memu_partial_is_reported_only_where_it_is_rendered(
        self, one_byte_change
    ):
        """GOLD-2: the report names exactly the files the change reaches, and no Loom file."""
        assert headlines(one_byte_change.stdout) == {
            ("CHANGED", f"memu/{profile}/{name}")
            for profile in PROFILES
            for name in ("AGENTS.md", ".nerve/provisioned.json")
        }


# --- GOLD-2: many changes in one run ---------------------------------------------------------


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> dict:
    """One template copy and one golden copy with a change of every kind, checked twice.

    Templates: a memU wording byte, a removed template (USER.md), a new template (NOTES.md),
    SOUL.md without its final newline, a job schedule in system.yaml. Goldens: an exec bit
    set on memU worker TOOLS.md and a CR in Loom worker MEMORY.md (Jinja turns a CR in a
    template into a newline, so a CR can only differ on the golden side).
    """
    root = tmp_path_factory.mktemp("planted")
    assets = copy_assets(root / "assets")
    workspace = assets / "templates" / "workspace"
    replace_once(assets / "templates/partials/memu/agents-memory.md", "two kinds", "two kindz")
    (workspace / '{% if profile == "personal" %}USER.md{% endif %}.jinja').unlink()
    (workspace / "NOTES.md.jinja").write_text("# Notes\n", encoding="utf-8")
    soul = workspace / "SOUL.md.jinja"
    soul.write_bytes(soul.read_bytes().rstrip(b"\n"))
    replace_once(workspace / "config/cron/system.yaml.jinja", '"0 5 * * *"', '"0 6 * * *"')

    goldens = root / "golden"
    shutil.copytree(GOLDEN_DIR, goldens)
    (goldens / "memu/worker/TOOLS.md").chmod(0o755)
    memory = goldens / "loom/worker/MEMORY.md"
    memory.write_bytes(memory.read_bytes().replace(b"\n", b"\r\n", 1))

    env = {"NERVE_ASSETS_DIR": str(assets)}
    before = snapshot(goldens)
    text = nerve(root / "home", "golden", "check", "--golden-dir", str(goldens), env=env)
    as_json = nerve(
        root / "home", "golden", "check", "--golden-dir", str(goldens), "--json", env=env
    )
    return {"text": text, "json": as_json, "before": before, "after": snapshot(goldens)}


class TestCheckReportsEveryDifference:
    def test_a_check_with_differences_exits_1(self, planted):
        """GOLD-2: any difference fails the check with exit status 1."""
        assert planted["text"].returncode == 1, planted["text"].stderr
        assert planted["json"].returncode == 1, planted["json"].stderr

    def test_changes_in_several_files_are_all_reported_in_one_run(self, planted):
        """GOLD-2: one run reports every mismatch, not just the first."""
        found = headlines(planted["text"].stdout)
        for expected in [
            ("CHANGED", "memu/personal/AGENTS.md"),
            ("CHANGED", "memu/worker/AGENTS.md"),
            ("CHANGED", "loom/worker/SOUL.md"),
            ("CHANGED", "memu/personal/config/cron/system.yaml"),
            ("CHANGED", "loom/worker/MEMORY.md"),
            ("MODE", "memu/worker/TOOLS.md"),
            ("MISSING", "loom/worker/NOTES.md"),
            ("ORPHAN", "memu/personal/USER.md"),
        ]:
            assert expected in found, (expected, sorted(found))

    def test_a_removed_template_leaves_its_goldens_as_orphans(self, planted):
        """GOLD-2: a golden that nothing renders any more is reported as an orphan."""
        found = headlines(planted["text"].stdout)
        assert {path for kind, path in found if kind == "ORPHAN"} == {
            f"{backend}/personal/USER.md" for backend in BACKEND_NAMES
        }

    def test_a_new_template_file_is_reported_as_missing_its_golden(self, planted):
        """GOLD-2: a rendered file without a golden is reported, for every render it is in."""
        found = headlines(planted["text"].stdout)
        assert {path for kind, path in found if kind == "MISSING"} == {
            f"{backend}/{profile}/NOTES.md" for backend in BACKEND_NAMES for profile in PROFILES
        }

    def test_an_exec_bit_change_on_a_golden_is_reported(self, planted):
        """GOLD-2: the exec bit is compared too, and the report says which side has it."""
        report = section(planted["text"].stdout, "MODE", "memu/worker/TOOLS.md")
        assert "golden executable, render not executable" in report
        assert ("CHANGED", "memu/worker/TOOLS.md") not in headlines(planted["text"].stdout)

    def test_a_carriage_return_in_a_golden_is_visible_in_the_diff(self, planted):
        """GOLD-2: a CR-only difference would be an invisible diff without the mark."""
        diff = section(planted["text"].stdout, "CHANGED", "loom/worker/MEMORY.md")
        assert f"\n-# Hot memory{CR_MARK}\n+# Hot memory\n" in diff

    def test_a_missing_final_newline_is_visible_in_the_diff(self, planted):
        """GOLD-2: the render lost its last newline; GNU diff's marker says so."""
        diff = section(planted["text"].stdout, "CHANGED", "memu/personal/SOUL.md")
        last_line = "- No hiding mistakes: say what went wrong and what you did about it."
        assert f"\n+{last_line}\n{NO_NEWLINE}\n" in diff

    def test_a_yaml_change_gets_a_structural_summary_naming_the_job_by_id(self, planted):
        """GOLD-2: for system.yaml the report adds which job and key changed (deepdiff)."""
        report = section(planted["text"].stdout, "CHANGED", "memu/personal/config/cron/system.yaml")
        assert "\nstructure:\n  jobs.memory-maintenance.schedule: changed\n" in report

    def test_json_output_parses_and_lists_the_same_differences(self, planted):
        """GOLD-2: ``--json`` is for machines: valid JSON naming every difference."""
        report = json.loads(planted["json"].stdout)
        assert report["ok"] is False
        listed = {(item["kind"].upper(), item["path"]) for item in report["differences"]}
        assert listed == headlines(planted["text"].stdout)
        by_path = {
            item["path"]: item for item in report["differences"] if item["kind"] == "changed"
        }
        assert "+You have two kindz of memory." in by_path["memu/personal/AGENTS.md"]["detail"]

    def test_check_never_writes_to_the_golden_folder(self, planted):
        """GOLD-2: a failing check leaves every golden byte, mode and mtime as it was."""
        assert planted["after"] == planted["before"]


# --- GOLD-2: how a difference is shown ------------------------------------------------------


class TestDiffShowsInvisibleBytes:
    def test_a_carriage_return_is_shown_as_a_mark_at_the_end_of_its_line(self):
        """GOLD-2: CRLF against LF must not be a diff of two identical-looking lines."""
        diff = unified_diff(b"one\r\ntwo\n", b"one\ntwo\n", "memu/texts/x.md")
        assert diff.splitlines()[:2] == [
            "--- golden/memu/texts/x.md",
            "+++ rendered/memu/texts/x.md",
        ]
        assert f"-one{CR_MARK}\n+one\n two\n" in diff

    def test_a_lone_carriage_return_stays_inside_its_line(self):
        """GOLD-2: only LF ends a line; a CR in the middle is shown, not taken as a line end."""
        diff = unified_diff(b"a\rb\nc\n", b"a b\nc\n", "x.md")
        assert f"-a{CR_MARK}b\n+a b\n c\n" in diff
        assert NO_NEWLINE not in diff

    def test_a_missing_final_newline_is_marked_as_gnu_diff_does(self):
        """GOLD-2: the marker follows the line that lacks the newline, on either side."""
        assert f"-last\n{NO_NEWLINE}\n+last\n" in unified_diff(b"x\nlast", b"x\nlast\n", "x.md")
        assert f"-last\n+last\n{NO_NEWLINE}\n" in unified_diff(b"x\nlast\n", b"x\nlast", "x.md")

    def test_identical_bytes_give_no_diff(self):
        """GOLD-2: the diff is empty exactly when there is nothing to show."""
        assert unified_diff(b"same\r\n", b"same\r\n", "x.md") == ""


class TestYamlStructuralSummary:
    GOLDEN = b"jobs:\n  - id: a\n    schedule: x\n  - id: b\n    schedule: y\n"

    def test_jobs_are_matched_by_id_not_by_position(self):
        """GOLD-2: reordering jobs is no change; only the edited key is named."""
        rendered = b"jobs:\n  - id: b\n    schedule: y\n  - id: a\n    schedule: z\n"
        assert structural_summary("c/system.yaml", self.GOLDEN, rendered) == [
            "jobs.a.schedule: changed"
        ]

    def test_an_added_and_a_removed_job_are_named_by_id(self):
        """GOLD-2: a replaced job reads as one removed and one added, by id."""
        rendered = b"jobs:\n  - id: b\n    schedule: y\n  - id: c\n    schedule: x\n"
        assert structural_summary("c/system.yaml", self.GOLDEN, rendered) == [
            "jobs.a: removed",
            "jobs.c: added",
        ]

    def test_a_repeated_job_id_still_shows_the_added_job(self):
        """GOLD-2: keyed by id, a second job with a known id would vanish from the summary."""
        rendered = self.GOLDEN + b"  - id: a\n    schedule: x\n"
        assert structural_summary("c/system.yaml", self.GOLDEN, rendered) == ["jobs.2: item added"]

    def test_a_file_that_is_no_longer_yaml_is_said_to_be_so(self):
        """GOLD-2: a broken render gets a summary line instead of a traceback."""
        [line] = structural_summary("c/system.yaml", self.GOLDEN, b"jobs: [\n")
        assert line.startswith("not valid YAML: ")

    def test_a_file_that_is_not_yaml_gets_no_summary(self):
        """GOLD-2: the summary is for YAML files only."""
        assert structural_summary("AGENTS.md", self.GOLDEN, b"jobs: []\n") == []


class TestCompare:
    def test_every_kind_of_difference_is_found_and_sorted_by_path(self):
        """GOLD-2: file set, bytes and exec bit are each compared."""
        expected = {
            "memu/a.md": RenderedFile("a.md", b"same\n", executable=False),
            "memu/b.md": RenderedFile("b.md", b"new\n", executable=False),
            "memu/c.sh": RenderedFile("c.sh", b"run\n", executable=True),
            "memu/d.md": RenderedFile("d.md", b"only rendered\n", executable=False),
        }
        goldens = {
            "memu/a.md": RenderedFile("a.md", b"same\n", executable=False),
            "memu/b.md": RenderedFile("b.md", b"old\n", executable=False),
            "memu/c.sh": RenderedFile("c.sh", b"run\n", executable=False),
            "memu/e.md": RenderedFile("e.md", b"only golden\n", executable=False),
        }
        found = [(d.kind, d.path) for d in compare(expected, goldens, Path("golden"))]
        assert found == [
            ("changed", "memu/b.md"),
            ("mode", "memu/c.sh"),
            ("missing", "memu/d.md"),
            ("orphan", "memu/e.md"),
        ]

    def test_a_headline_names_the_kind_and_the_path(self):
        """GOLD-2: each reported difference starts with one greppable line."""
        line = Difference("orphan", "loom/worker/X.md").headline()
        assert line == "ORPHAN   loom/worker/X.md (golden, but no longer rendered)"


# --- GOLD-3 --------------------------------------------------------------------------------


def _below(state: Snapshot, backend: str) -> Snapshot:
    return {path: value for path, value in state.items() if path.startswith(f"{backend}/")}


@pytest.fixture(scope="module")
def loom_update(tmp_path_factory) -> dict:
    """``golden update --backend loom`` after a change to a Loom and to a memU partial.

    Each backend's golden folder also holds a stray file, an orphan.
    """
    root = tmp_path_factory.mktemp("loom-update")
    assets = copy_assets(root / "assets")
    replace_once(
        assets / "templates/partials/loom/tools-memory.md",
        "run the integrity report of a namespace",
        "run the integrity report of one namespace",
    )
    replace_once(assets / "templates/partials/memu/agents-memory.md", "two kinds", "two kindz")
    goldens = root / "golden"
    shutil.copytree(GOLDEN_DIR, goldens)
    for backend in BACKEND_NAMES:
        (goldens / backend / "worker" / "STRAY.md").write_text("stray\n", encoding="utf-8")
    env = {"NERVE_ASSETS_DIR": str(assets)}
    before = snapshot(goldens)
    update = nerve(
        root / "home",
        "golden",
        "update",
        "--backend",
        "loom",
        "--golden-dir",
        str(goldens),
        env=env,
    )
    after = snapshot(goldens)
    check = nerve(root / "home", "golden", "check", "--json", "--golden-dir", str(goldens), env=env)
    return {"update": update, "before": before, "after": after, "check": check, "dir": goldens}


class TestUpdateOfLoom:
    def test_update_of_loom_lists_what_it_wrote_and_exits_1_for_memus_change(self, loom_update):
        """GOLD-3: the author sees which goldens the update rewrote; memU's wording changed too
        and was not named, so a check would still fail: exit 1 (docs/exit-status.md)."""
        result = loom_update["update"]
        assert result.returncode == 1, result.stderr
        assert "--backend memu" in result.stdout
        assert "updated loom/personal/TOOLS.md\n" in result.stdout
        assert "updated loom/worker/TOOLS.md\n" in result.stdout

    def test_update_of_loom_rewrites_the_loom_goldens_so_they_match_the_render(self, loom_update):
        """GOLD-3: after the update, the check finds nothing left to do under loom/."""
        golden = (loom_update["dir"] / "loom/personal/TOOLS.md").read_text(encoding="utf-8")
        assert "run the integrity report of one namespace" in golden
        report = json.loads(loom_update["check"].stdout)
        assert [d for d in report["differences"] if d["path"].startswith("loom/")] == []
        assert report["wording"] == []

    def test_update_of_loom_leaves_every_memu_golden_as_it_was(self, loom_update):
        """GOLD-3: a Loom update never touches memU goldens, though memU wording changed too."""
        assert _below(loom_update["after"], "memu") == _below(loom_update["before"], "memu")
        report = json.loads(loom_update["check"].stdout)
        assert {"memu/personal/AGENTS.md", "memu/worker/STRAY.md"} <= {
            d["path"] for d in report["differences"]
        }

    def test_update_of_loom_removes_loom_orphans(self, loom_update):
        """GOLD-3: a golden nothing renders any more is deleted by the update of its backend."""
        assert "loom/worker/STRAY.md" in loom_update["before"]
        assert "loom/worker/STRAY.md" not in loom_update["after"]
        assert "updated loom/worker/STRAY.md\n" in loom_update["update"].stdout


@pytest.fixture(scope="module")
def memu_update(tmp_path_factory) -> dict:
    """A memU wording change: ``golden update`` unnamed, then ``--backend memu``, then check.

    The change is in AGENTS.md wording, not a job prompt, so the shipped-prompt registry of
    the package (TXT-7) has nothing to record.
    """
    root = tmp_path_factory.mktemp("memu-update")
    assets = copy_assets(root / "assets")
    replace_once(assets / "templates/partials/memu/agents-memory.md", "two kinds", "two kindz")
    goldens = root / "golden"
    shutil.copytree(GOLDEN_DIR, goldens)
    (goldens / "memu/worker/STRAY.md").write_text("stray\n", encoding="utf-8")
    env = {"NERVE_ASSETS_DIR": str(assets)}
    # A memU update records unrecorded memU prompts in the package itself; refuse to run
    # rather than write into the checkout.
    assert unrecorded_memu_prompts() == [], "record the current memU prompts first"
    registry = SHIPPED_PROMPTS.read_bytes()
    before = snapshot(goldens)
    unnamed = nerve(root / "home", "golden", "update", "--golden-dir", str(goldens), env=env)
    after_unnamed = snapshot(goldens)
    loom_named = nerve(
        root / "home",
        "golden",
        "update",
        "--backend",
        "loom",
        "--golden-dir",
        str(goldens),
        env=env,
    )
    after_loom_named = snapshot(goldens)
    named = nerve(
        root / "home",
        "golden",
        "update",
        "--backend",
        "memu",
        "--golden-dir",
        str(goldens),
        env=env,
    )
    after_named = snapshot(goldens)
    check = nerve(root / "home", "golden", "check", "--golden-dir", str(goldens), env=env)
    return {
        "unnamed": unnamed,
        "loom_named": loom_named,
        "after_loom_named": after_loom_named,
        "named": named,
        "check": check,
        "before": before,
        "after_unnamed": after_unnamed,
        "after_named": after_named,
        "registry_unchanged": SHIPPED_PROMPTS.read_bytes() == registry,
        "dir": goldens,
    }


class TestUpdateOfMemu:
    def test_update_without_a_backend_leaves_memu_goldens_alone_though_memu_changed(
        self, memu_update
    ):
        """GOLD-3: memU's frozen wording changes only when someone asks for it by name."""
        assert memu_update["unnamed"].returncode == 1, memu_update["unnamed"].stderr
        assert memu_update["after_unnamed"] == memu_update["before"]

    def test_update_without_a_backend_says_memu_must_be_named(self, memu_update):
        """GOLD-3: the author learns how to update memU instead of wondering why it did not."""
        assert "--backend memu" in memu_update["unnamed"].stdout

    def test_update_of_loom_by_name_exits_1_while_memus_goldens_still_differ(self, memu_update):
        """GOLD-3 and docs/exit-status.md: ``golden update`` exits 1 while a check would still
        fail, whichever backends were named; memU's goldens stay as they were."""
        ran = memu_update["loom_named"]
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "--backend memu" in ran.stdout
        assert memu_update["after_loom_named"] == memu_update["before"]

    def test_update_of_memu_by_name_rewrites_memu_goldens_and_removes_their_orphans(
        self, memu_update
    ):
        """GOLD-3: ``--backend memu`` is the way memU goldens change."""
        assert memu_update["named"].returncode == 0, memu_update["named"].stderr
        golden = (memu_update["dir"] / "memu/personal/AGENTS.md").read_text(encoding="utf-8")
        assert "You have two kindz of memory." in golden
        assert "memu/worker/STRAY.md" not in memu_update["after_named"]

    def test_check_passes_against_the_updated_goldens(self, memu_update):
        """GOLD-3: an update leaves goldens that the check accepts."""
        result = memu_update["check"]
        assert result.returncode == 0, result.stdout + result.stderr

    def test_update_of_memu_wording_outside_job_prompts_leaves_the_prompt_registry(
        self, memu_update
    ):
        """GOLD-3, TXT-7: only a changed memU job prompt is recorded in the package."""
        assert memu_update["registry_unchanged"]


class TestUpdateRefusedUnderCi:
    def test_update_under_ci_is_refused_in_one_line_and_writes_nothing(
        self, run_nerve, assets_copy, golden_copy
    ):
        """GOLD-3: CI checks goldens and never makes them, even with changes to write."""
        replace_once(
            assets_copy / "templates/partials/loom/tools-memory.md",
            "run the integrity report of a namespace",
            "run the integrity report of one namespace",
        )
        before = snapshot(golden_copy)
        result = run_nerve(
            "golden",
            "update",
            "--backend",
            "loom",
            "--golden-dir",
            str(golden_copy),
            env={"NERVE_ASSETS_DIR": str(assets_copy), "CI": "true"},
        )
        assert_one_line_error(result, "CI")
        assert result.stdout == ""
        assert snapshot(golden_copy) == before


# --- GOLD-1 --------------------------------------------------------------------------------


class TestGoldenTreeLayout:
    def test_the_golden_tree_holds_each_backend_in_each_profile(self):
        """GOLD-1: golden/<backend>/<profile>/ is a whole workspace for all four pairs."""
        for backend in BACKEND_NAMES:
            for profile in PROFILES:
                workspace = GOLDEN_DIR / backend / profile
                for name in ("AGENTS.md", "TOOLS.md", "MEMORY.md", "SOUL.md"):
                    assert (workspace / name).is_file(), workspace / name
                assert (workspace / "config/cron/system.yaml").is_file()

    def test_each_backend_has_a_golden_for_every_runtime_text_case(self):
        """GOLD-1: golden/<backend>/texts/<name>[@<case>].md, one file per text and case."""
        for backend in BACKEND_NAMES:
            on_disk = {path.name for path in (GOLDEN_DIR / backend / "texts").glob("*.md")}
            cases = {text.file_name for text in all_texts() if text.backend == backend}
            assert cases, backend
            assert on_disk == cases, backend

    def test_every_rendered_file_has_a_golden_and_every_golden_is_rendered(self, tmp_path):
        """GOLD-1: the golden tree is exactly the render, no more and no less."""
        rendered = set(render_expected(tmp_path))
        assert rendered == set(read_goldens(GOLDEN_DIR, BACKEND_NAMES))


# --- GOLD-6 --------------------------------------------------------------------------------


class TestGoldensAreByteExact:
    def test_gitattributes_marks_the_golden_tree_as_not_text(self):
        """GOLD-6: no end-of-line conversion may ever touch a golden."""
        lines = (REPO_ROOT / ".gitattributes").read_text(encoding="utf-8").splitlines()
        assert "golden/** -text" in [line.strip() for line in lines]

    @pytest.mark.skipif(not (REPO_ROOT / ".git").exists(), reason="not a git checkout")
    def test_git_treats_a_golden_file_as_not_text(self):
        """GOLD-6: git itself reads the attribute for a golden file."""
        result = subprocess.run(
            ["git", "check-attr", "text", "--", "golden/memu/personal/AGENTS.md"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout == "golden/memu/personal/AGENTS.md: text: unset\n"


class TestGoldenCommandsNeedACheckout:
    def test_update_in_a_folder_with_its_own_golden_folder_touches_nothing(self, tmp_path):
        """Defect 9: a user's golden/ is not ours; update refuses and deletes no file."""
        project = tmp_path / "project"
        (project / "golden" / "loom" / "personal").mkdir(parents=True)
        precious = project / "golden" / "loom" / "personal" / "notes.txt"
        precious.write_text("mine\n")
        before = snapshot(project)
        result = nerve(tmp_path / "home", "golden", "update", cwd=project)
        assert_one_line_error(result, "not a checkout", "--golden-dir")
        assert snapshot(project) == before

    def test_check_outside_a_checkout_is_refused(self, tmp_path):
        result = nerve(tmp_path / "home", "golden", "check", cwd=tmp_path)
        assert_one_line_error(result, "not a checkout")

    def test_a_subfolder_of_the_checkout_finds_its_goldens(self, tmp_path):
        result = nerve(
            tmp_path / "home", "golden", "update", cwd=REPO_ROOT / "docs", env={"CI": "1"}
        )
        assert_one_line_error(result, "CI")  # found the checkout, then refused under CI

    def test_update_never_deletes_a_file_that_is_not_a_golden_name(self, tmp_path, golden_copy):
        """Defect 9: with --golden-dir, an unknown file below it is left alone."""
        stray = golden_copy / "loom" / "README.txt"
        stray.write_text("about these goldens\n")
        result = nerve(
            tmp_path / "home", "golden", "update", "--golden-dir", str(golden_copy), cwd=tmp_path
        )
        assert result.returncode == 0, result.stderr
        assert stray.read_text() == "about these goldens\n"

    def test_golden_dir_naming_a_file_is_one_line(self, tmp_path):
        """Defect 10: `golden update --golden-dir FILE`."""
        target = tmp_path / "a-file"
        target.write_text("")
        for action in ("update", "check"):
            result = nerve(tmp_path / "home", "golden", action, "--golden-dir", str(target))
            assert_one_line_error(result, "a-file", "not a folder")

    @pytest.mark.parametrize("value", ["false", "0", "", "no"])
    def test_a_ci_variable_that_is_not_true_does_not_refuse_update(
        self, tmp_path, golden_copy, value
    ):
        """Defect 11: only a true CI value refuses an update."""
        result = nerve(
            tmp_path / "home",
            "golden",
            "update",
            "--backend",
            "loom",
            "--golden-dir",
            str(golden_copy),
            env={"CI": value},
        )
        assert result.returncode == 0, result.stderr


class TestBrokenTemplatesExitThree:
    @pytest.mark.parametrize(
        ("planted", "fragment"),
        [("{{ no_such_name }}", "no_such_name"), ("{% if %}", "TemplateSyntaxError")],
    )
    def test_a_template_that_cannot_render_is_exit_3_naming_file_and_line(
        self, tmp_path, planted, fragment
    ):
        """GOLD-2: exit 3 with the template file and line, so CI tells it from a wording change."""
        assets = copy_assets(tmp_path / "assets")
        soul = assets / "templates" / "workspace" / "SOUL.md.jinja"
        lines = soul.read_text().count("\n")
        soul.write_text(soul.read_text() + planted + "\n")
        env = {"NERVE_ASSETS_DIR": str(assets)}
        for args in (("golden", "check"), ("init", "--workspace", str(tmp_path / "ws"))):
            result = nerve(tmp_path / "home", *args, env=env, cwd=REPO_ROOT)
            assert result.returncode == 3, (args, result.stderr)
            (line,) = result.stderr.strip().splitlines()
            assert f"SOUL.md.jinja:{lines + 1}" in line and fragment in line, line
        assert not (tmp_path / "ws").exists()
