"""What ``nerve golden check`` and ``update`` tell a template author (OPS-1, GOLD-2, GOLD-3).

The exact accept command, and none where update would refuse; a manifest change in one line; a
MISSING file shown whole; colour on a terminal only; WORDING problems traced to the template
line; ``update`` without ``--backend`` saying what is left. Changes are planted in private
copies of the templates (``NERVE_ASSETS_DIR``) and of ``golden/``; each scenario's runs happen
once per module.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.cli.summary import golden_report_json, golden_report_text, wants_colour
from provisioner.golden.advice import acceptance, left_line
from provisioner.golden.check import CheckReport, Difference
from provisioner.golden.places import TemplateLines
from provisioner.golden.shown import manifest_summary
from provisioner.templating.wording import WordingProblem
from tests.golden.test_golden import copy_assets, nerve, replace_once, section
from tests.support.processes import clean_environment, read_terminal
from tests.support.repo import GOLDEN_DIR

ACCEPT = "accept with: "
NOTES = "# Notes\n\nWrite down what you learn.\n"
FIRST_JSON_FIELDS = {"ok", "files_checked", "differences", "wording"}  # never dropped


def nerve_on_terminal(home: Path, *args: str, env: dict[str, str]) -> tuple[int, str]:
    """Run the CLI with its standard output on a pseudo-terminal; (status, what it printed)."""
    home.mkdir(parents=True, exist_ok=True)
    leader, follower = os.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "provisioner", *args],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.DEVNULL,
            env=clean_environment(home, {"TERM": "xterm", "NO_COLOR": "", **env}),
            cwd=home,
        )
    finally:
        os.close(follower)
    shown = read_terminal(leader, errors="strict")
    status = process.wait(timeout=120)
    return status, shown.replace("\r\n", "\n")


def printed_command(output: str, prefix: str = ACCEPT) -> str:
    """The command of the one line starting with ``prefix`` (or after "; accept with: ")."""
    for line in output.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
        if line.startswith("left: ") and f"; {ACCEPT}" in line:
            return line.split(f"; {ACCEPT}", 1)[1]
    raise AssertionError(f"no {prefix!r} line in:\n{output}")


def run_printed(home: Path, command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run a printed ``python -m provisioner …`` command word for word, as a shell would split
    it (the checks run as ``python -m provisioner``, so that is the command they print)."""
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "provisioner"], command
    return nerve(home, *words[3:], env=env)


def line_of(path: Path, fragment: str) -> int:
    """The 1-based number of the one line of ``path`` holding ``fragment``."""
    numbers = [
        number
        for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1)
        if fragment in line
    ]
    assert len(numbers) == 1, (path, fragment, numbers)
    return numbers[0]


# --- a memU change and a new template --------------------------------------------------------


@pytest.fixture(scope="module")
def drift(tmp_path_factory) -> dict:
    """A memU wording change ("kinds" to "kindz") and a new template NOTES.md.

    Checked as text, as JSON, under CI, on a terminal with and without NO_COLOR; then the
    accept command printed is run as printed. A second golden copy goes through ``update``
    without ``--backend``, then the command its "left:" line gives, then ``update`` again.
    The golden folder's name has a space, so the printed command must quote it.
    """
    root = tmp_path_factory.mktemp("drift")
    assets = copy_assets(root / "assets")
    replace_once(assets / "templates/partials/memu/agents-memory.md", "two kinds", "two kindz")
    (assets / "templates/workspace/NOTES.md.jinja").write_text(NOTES, encoding="utf-8")
    goldens, second = root / "golden copy", root / "golden second"
    shutil.copytree(GOLDEN_DIR, goldens)
    shutil.copytree(GOLDEN_DIR, second)
    env = {"NERVE_ASSETS_DIR": str(assets)}
    home = root / "home"
    check = ("golden", "check", "--golden-dir", str(goldens))
    runs: dict = {"assets": assets, "goldens": goldens, "second": second}
    runs["text"] = nerve(home, *check, env=env)
    runs["json"] = nerve(home, *check, "--json", env=env)
    runs["ci_text"] = nerve(home, *check, env={**env, "CI": "true"})
    runs["ci_json"] = nerve(home, *check, "--json", env={**env, "CI": "true"})
    runs["terminal"] = nerve_on_terminal(home, *check, env=env)
    runs["terminal_no_colour"] = nerve_on_terminal(home, *check, env={**env, "NO_COLOR": "1"})
    runs["accepted"] = run_printed(home, printed_command(runs["text"].stdout), env)
    runs["after_accept"] = nerve(home, *check, env=env)
    update = ("golden", "update", "--golden-dir", str(second))
    runs["unnamed"] = nerve(home, *update, env=env)
    runs["left_accepted"] = run_printed(home, printed_command(runs["unnamed"].stdout), env)
    runs["unnamed_again"] = nerve(home, *update, env=env)
    return runs


class TestTheAcceptCommand:
    def test_it_names_every_backend_that_differs_and_the_golden_folder_given(self, drift):
        """OPS-1: the command is exact, memU named since its goldens change only by name."""
        assert drift["text"].returncode == 1, drift["text"].stderr
        expected = (
            "python -m provisioner golden update --backend memu --backend loom --golden-dir "
            + shlex.quote(str(drift["goldens"]))
        )
        assert printed_command(drift["text"].stdout) == expected
        assert "<backend>" not in drift["text"].stdout

    def test_run_as_printed_it_accepts_every_difference(self, drift):
        """OPS-1, GOLD-3: copying the printed line is all it takes; the check then passes."""
        assert drift["accepted"].returncode == 0, drift["accepted"].stderr
        assert drift["after_accept"].returncode == 0, drift["after_accept"].stdout

    def test_json_gives_the_same_command(self, drift):
        """OPS-1: machines get the command too, beside every field of the first version."""
        report = json.loads(drift["json"].stdout)
        assert report["accept_command"] == printed_command(drift["text"].stdout)
        assert report["not_accepted"] == []

    def test_under_ci_no_command_is_given_and_the_line_says_why(self, drift):
        """GOLD-3: CI refuses update, so the check sends nobody there; it says so instead."""
        out = drift["ci_text"].stdout
        assert drift["ci_text"].returncode == 1
        assert ACCEPT not in out and "golden update --backend" not in out
        assert out.endswith(
            "\nnot accepted: golden update is refused while CI is set: accept changes locally\n"
        )
        report = json.loads(drift["ci_json"].stdout)
        assert report["accept_command"] is None
        assert report["not_accepted"] == [
            "golden update is refused while CI is set: accept changes locally"
        ]


class TestHowDifferencesAreShown:
    def test_a_manifest_change_is_one_line_naming_the_files_not_a_diff_of_digests(self, drift):
        """GOLD-2: the manifest follows its files; their digests tell an author nothing."""
        shown = section(drift["text"].stdout, "CHANGED", "memu/personal/.nerve/provisioned.json")
        assert shown == (
            "CHANGED  memu/personal/.nerve/provisioned.json (bytes differ)\n"
            "  manifest: new digest for AGENTS.md; now records NOTES.md\n"
        )
        assert "sha256:" not in drift["text"].stdout

    def test_json_keeps_the_manifest_diff_and_adds_the_line(self, drift):
        """OPS-1: --json drops nothing: the diff stays in detail, the line is in summary."""
        differences = json.loads(drift["json"].stdout)["differences"]
        [manifest] = [d for d in differences if d["path"] == "loom/worker/.nerve/provisioned.json"]
        assert manifest["summary"] == "manifest: now records NOTES.md"
        assert '+    "NOTES.md": "sha256:' in manifest["detail"]

    def test_a_missing_file_is_shown_whole(self, drift):
        """GOLD-2: what update would freeze is reviewed before it is accepted."""
        shown = section(drift["text"].stdout, "MISSING", "loom/worker/NOTES.md")
        assert shown.endswith("\n+# Notes\n+\n+Write down what you learn.\n"), shown
        differences = json.loads(drift["json"].stdout)["differences"]
        [missing] = [d for d in differences if d["path"] == "memu/personal/NOTES.md"]
        assert missing["kind"] == "missing" and "+Write down what you learn.\n" in missing["detail"]

    def test_the_summary_names_the_folder_that_was_rendered(self, drift):
        """OPS-1: the author sees which templates were compared, and why those."""
        assert f" from {drift['assets']} (NERVE_ASSETS_DIR)\n" in drift["text"].stdout
        report = json.loads(drift["json"].stdout)
        assert report["rendered_from"] == str(drift["assets"])
        assert report["rendered_from_origin"] == "NERVE_ASSETS_DIR"

    def test_json_keeps_every_field_of_the_first_version(self, drift):
        """OPS-1: fields are added, never dropped or renamed."""
        report = json.loads(drift["json"].stdout)
        assert set(report) >= FIRST_JSON_FIELDS
        assert report["ok"] is False and report["files_checked"] > 0
        for difference in report["differences"]:
            assert set(difference) >= {"kind", "path", "detail"}
        assert report["problems"] == len(report["differences"])


class TestColour:
    def test_a_terminal_gets_coloured_headlines_and_diff_lines(self, drift):
        """OPS-1: on a terminal kinds, added and removed lines stand out."""
        status, out = drift["terminal"]
        assert status == 1, out
        assert "\x1b[1;33mCHANGED\x1b[0m  memu/personal/AGENTS.md (bytes differ)" in out
        assert "\x1b[32m+You have two kindz of memory.\x1b[0m" in out
        assert "\x1b[31m-You have two kinds of memory.\x1b[0m" in out

    def test_no_color_turns_colour_off_on_a_terminal(self, drift):
        """OPS-1: NO_COLOR is respected (no-color.org)."""
        status, out = drift["terminal_no_colour"]
        assert status == 1 and "CHANGED  memu/personal/AGENTS.md" in out
        assert "\x1b[" not in out

    def test_output_that_is_not_a_terminal_is_never_coloured(self, drift):
        """OPS-1: a pipe or a log file gets plain text, whatever the environment."""
        assert "\x1b[" not in drift["text"].stdout
        assert "\x1b[" not in drift["json"].stdout


class TestUpdateWithoutABackend:
    def test_it_updates_loom_and_says_in_one_line_what_is_left_for_memu(self, drift):
        """GOLD-3: memU's goldens wait for their name; the line gives the exact command."""
        result = drift["unnamed"]
        assert result.returncode == 1, result.stderr
        memu = sum(
            1 for d in json.loads(drift["json"].stdout)["differences"] if d["path"][:5] == "memu/"
        )
        quoted = shlex.quote(str(drift["second"]))
        assert result.stdout.splitlines()[-1] == (
            f"left: {memu} golden differences for memu (memU goldens change only when named); "
            f"accept with: python -m provisioner golden update --backend memu --golden-dir {quoted}"
        )
        assert "updated loom/worker/NOTES.md\n" in result.stdout
        assert "updated memu/" not in result.stdout

    def test_with_nothing_left_it_exits_0_and_says_nothing_more(self, drift):
        """GOLD-3: the exit status is 1 exactly while the check would still fail."""
        assert drift["left_accepted"].returncode == 0, drift["left_accepted"].stderr
        again = drift["unnamed_again"]
        assert again.returncode == 0, again.stdout + again.stderr
        assert "left:" not in again.stdout
        assert again.stdout.startswith("0 golden files updated for loom from ")


# --- wording problems --------------------------------------------------------------------------

JINJA_LINE = "Store facts for {{ agent_name }} with `mcp__nerve__{{ 'memo' ~ 'rize' }}`."


@pytest.fixture(scope="module")
def misworded(tmp_path_factory) -> dict:
    """A memU wording change, and two Loom wording problems planted in partials.

    ``memory-hot.md`` names `memory_recall` in a line of plain text; ``tools-memory.md`` gets
    a last line whose memU tool name Jinja assembles, so no template line holds the name.
    """
    root = tmp_path_factory.mktemp("misworded")
    assets = copy_assets(root / "assets")
    partials = assets / "templates" / "partials"
    replace_once(partials / "memu/agents-memory.md", "two kinds", "two kindz")
    replace_once(
        partials / "loom/memory-hot.md",
        "so keep it under a page.",
        "so keep it under a page. Check with `memory_recall` first.",
    )
    tools = partials / "loom/tools-memory.md"
    tools.write_text(tools.read_text(encoding="utf-8") + JINJA_LINE + "\n", encoding="utf-8")
    goldens = root / "golden"
    shutil.copytree(GOLDEN_DIR, goldens)
    env = {"NERVE_ASSETS_DIR": str(assets)}
    home = root / "home"
    check = ("golden", "check", "--golden-dir", str(goldens))
    runs: dict = {"assets": assets, "goldens": goldens}
    runs["render"] = nerve(
        home, "render", "--backend", "loom", "--out", str(root / "render"), env=env
    )
    runs["rendered"] = root / "render"
    runs["text"] = nerve(home, *check, env=env)
    runs["json"] = nerve(home, *check, "--json", env=env)
    runs["unnamed"] = nerve(home, "golden", "update", "--golden-dir", str(goldens), env=env)
    runs["accepted"] = run_printed(home, printed_command(runs["text"].stdout), env)
    runs["after_accept"] = nerve(home, *check, "--json", env=env)
    return runs


def _wording_block(output: str, text: str, tool: str) -> list[str]:
    """The WORDING line for ``text`` and ``tool``, and the line under it."""
    lines = output.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith(f"WORDING  {text}: names '{tool}'")
    )
    return lines[start : start + 2]


class TestWordingProblemsNameTheirTemplateLine:
    def test_a_plain_line_is_traced_to_its_partial_and_line(self, misworded):
        """GOLD-5: the author is sent to the partial's line, not left to search the render."""
        assets = misworded["assets"]
        partial_line = line_of(assets / "templates/partials/loom/memory-hot.md", "memory_recall")
        rendered_line = line_of(GOLDEN_DIR / "loom/personal/MEMORY.md", "keep it under a page.")
        assert _wording_block(misworded["text"].stdout, "loom/personal/MEMORY.md", "memory_recall")[
            1
        ] == (
            f"         templates/partials/loom/memory-hot.md:{partial_line} "
            f"(rendered line {rendered_line})"
        )

    def test_a_line_whose_tool_name_jinja_assembles_is_traced_through_its_text(self, misworded):
        """GOLD-5: no template line holds "mcp__nerve__memorize"; its fixed text finds it."""
        assert misworded["render"].returncode == 0, misworded["render"].stderr
        assets = misworded["assets"]
        partial_line = line_of(assets / "templates/partials/loom/tools-memory.md", "Store facts")
        rendered = line_of(misworded["rendered"] / "TOOLS.md", "mcp__nerve__memorize")
        assert _wording_block(misworded["text"].stdout, "loom/personal/TOOLS.md", "memorize")[
            1
        ] == (
            f"         templates/partials/loom/tools-memory.md:{partial_line} "
            f"(rendered line {rendered})"
        )

    def test_json_gives_the_template_lines_and_the_rendered_line(self, misworded):
        """OPS-1: the same places for machines, as new fields of each wording problem."""
        wording = json.loads(misworded["json"].stdout)["wording"]
        [problem] = [w for w in wording if w["text"] == "loom/worker/MEMORY.md"]
        partial = misworded["assets"] / "templates/partials/loom/memory-hot.md"
        assert problem["tool"] == "memory_recall"
        assert problem["template_lines"] == [
            {"path": "templates/partials/loom/memory-hot.md", "line": line_of(partial, "recall")}
        ]
        assert isinstance(problem["rendered_line"], int)

    def test_the_update_refusal_names_the_template_line_of_the_first_problem(self, misworded):
        """GOLD-5: update never freezes a problem, and says where to fix the first one."""
        result = misworded["unnamed"]
        assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
        partial = misworded["assets"] / "templates/partials/loom/memory-hot.md"
        # Four: MEMORY.md and TOOLS.md of both Loom profiles; the first by path.
        assert result.stderr == (
            "python -m provisioner: error: golden update refused: 4 wording problems, "
            "the first: loom/personal/MEMORY.md: names 'memory_recall' (a memU "
            "tool in Loom wording) at templates/partials/loom/memory-hot.md:"
            f"{line_of(partial, 'memory_recall')}; see python -m provisioner golden check\n"
        )


class TestAcceptingBesideWordingProblems:
    def test_the_accept_command_leaves_out_the_backend_update_would_refuse(self, misworded):
        """OPS-1: no hint where update would refuse: Loom is named as not accepted, and why."""
        out = misworded["text"].stdout
        assert printed_command(
            out
        ) == "python -m provisioner golden update --backend memu --golden-dir " + (
            shlex.quote(str(misworded["goldens"]))
        )
        assert (
            "not accepted: Loom wording has problems, and update never freezes them: "
            "fix the WORDING lines above first\n"
        ) in out

    def test_the_command_given_runs_and_leaves_only_the_wording(self, misworded):
        """OPS-1: the printed command is one that runs; what is left is Loom's wording, so a
        check would still fail and the update says so with exit 1 (docs/exit-status.md)."""
        accepted = misworded["accepted"]
        assert accepted.returncode == 1, accepted.stderr
        assert "4 wording problems for loom (not updated)" in accepted.stdout
        report = json.loads(misworded["after_accept"].stdout)
        assert [d["path"] for d in report["differences"] if d["path"][:5] == "memu/"] == []
        assert {w["backend"] for w in report["wording"]} == {"loom"}
        assert [d for d in report["differences"] if d["path"][:5] == "loom/"]  # still differ,
        assert report["accept_command"] is None  # but no update would take them
        assert [reason.split(" ", 1)[0] for reason in report["not_accepted"]] == ["Loom"]


# --- the pieces, in process ---------------------------------------------------------------------


def _manifest(files: dict[str, str], **answers: str) -> bytes:
    return json.dumps({"answers": answers, "files": files, "format": 1}).encode()


class TestManifestSummary:
    def test_it_names_changed_new_and_dropped_files_and_changed_answers(self):
        """GOLD-2: one line for the whole manifest, digests left out."""
        golden = _manifest({"A.md": "sha256:1", "B.md": "sha256:2"}, timezone="UTC")
        rendered = _manifest({"A.md": "sha256:9", "C.md": "sha256:3"}, timezone="Europe/Paris")
        assert manifest_summary(golden, rendered) == (
            "manifest: new digest for A.md; now records C.md; no longer records B.md; "
            "answers.timezone changed"
        )

    def test_many_files_are_counted_after_the_first_few(self):
        """GOLD-2: the line stays one line when every file changed."""
        names = [f"F{i}.md" for i in range(7)]
        golden = _manifest({name: "sha256:1" for name in names})
        rendered = _manifest({name: "sha256:2" for name in names})
        summary = manifest_summary(golden, rendered)
        assert summary == "manifest: new digest for F0.md, F1.md, F2.md, F3.md and 3 more"

    def test_a_manifest_that_is_not_json_gets_no_summary_so_its_diff_is_shown(self):
        """GOLD-2: a broken manifest is shown as it is, not summarised away."""
        assert manifest_summary(b"{not json", _manifest({})) == ""

    def test_a_difference_with_a_summary_prints_it_instead_of_its_diff(self):
        """GOLD-2: the text shows the line; the JSON keeps both."""
        difference = Difference("changed", "memu/worker/.nerve/provisioned.json", "-x\n+y\n", "s")
        report = CheckReport(differences=[difference], files_checked=1)
        assert "-x" not in golden_report_text(report)
        assert "\n  s\n" in golden_report_text(report)
        [shown] = golden_report_json(report)["differences"]
        assert shown == {
            "kind": "changed",
            "path": difference.path,
            "detail": "-x\n+y\n",
            "summary": "s",
        }


class TestAcceptance:
    def _report(self, *differences: Difference, wording: tuple = ()) -> CheckReport:
        return CheckReport(differences=list(differences), wording=list(wording), files_checked=9)

    def test_the_command_quotes_a_golden_folder_a_shell_would_split(self):
        """OPS-1: the printed command runs as printed, spaces and all."""
        report = self._report(Difference("changed", "loom/worker/TOOLS.md"))
        advice = acceptance(report, golden_dir_option=Path("my goldens"), env={})
        assert advice.command == (
            "nerve-provisioner golden update --backend loom --golden-dir 'my goldens'"
        )

    def test_an_unrecorded_memu_prompt_is_accepted_by_a_memu_update(self):
        """TXT-7: the registry is written by a memU update, so that is the command."""
        report = self._report(Difference("unrecorded", "templates/x.json: memory-maintenance"))
        advice = acceptance(report, golden_dir_option=None, env={})
        assert advice.command == "nerve-provisioner golden update --backend memu"

    def test_a_ci_value_that_is_not_true_still_gets_the_command(self):
        """GOLD-3: CI=false does not refuse update, so it does not hide the command."""
        report = self._report(Difference("missing", "memu/personal/X.md"))
        assert acceptance(report, golden_dir_option=None, env={"CI": "false"}).command == (
            "nerve-provisioner golden update --backend memu"
        )

    def test_wording_problems_alone_give_no_command(self):
        """GOLD-5: nothing differs, so nothing is to accept; the refusal is said."""
        problem = WordingProblem("loom/worker/TOOLS.md", "loom", "memorize", "a memU tool")
        advice = acceptance(self._report(wording=(problem,)), golden_dir_option=None, env={})
        assert advice.command is None and len(advice.refused) == 1

    def test_nothing_left_after_an_update_gives_no_line(self):
        """GOLD-3: the "left:" line appears only while a check would fail."""
        assert left_line(CheckReport(), None) == ""


class TestColourChoice:
    def test_a_terminal_gets_colour(self):
        """OPS-1: colour where a person reads it."""
        leader, follower = os.openpty()
        with open(follower, "w") as terminal:
            try:
                assert wants_colour(terminal, {}) is True
                assert wants_colour(terminal, {"NO_COLOR": ""}) is True  # empty is unset
                assert wants_colour(terminal, {"NO_COLOR": "1"}) is False
                assert wants_colour(terminal, {"TERM": "dumb"}) is False
            finally:
                os.close(leader)

    def test_a_file_gets_no_colour(self, tmp_path):
        """OPS-1: never colour when not a TTY."""
        with open(tmp_path / "out.txt", "w") as file:
            assert wants_colour(file, {}) is False


class TestTemplateLines:
    def test_the_own_backends_partial_comes_first_and_jinja_stands_for_any_text(self, tmp_path):
        """GOLD-5: the same sentence in two backends' partials: the text's own is named first."""
        for backend in ("loom", "memu"):
            partial = tmp_path / "templates" / "partials" / backend / "piece.md"
            partial.parent.mkdir(parents=True)
            partial.write_text("intro\n  Ask {{ agent_name }} to call `loom_search`.\n")
        lines = TemplateLines(tmp_path)
        places = lines.behind("Ask Nerve to call `loom_search`.", "loom_search", "memu")
        assert [str(place) for place in places] == [
            "templates/partials/memu/piece.md:2",
            "templates/partials/loom/piece.md:2",
        ]

    def test_a_line_mostly_of_jinja_matches_nothing_by_its_text(self, tmp_path):
        """GOLD-5: ``{{ x }}`` alone would match every line; it is never offered."""
        partial = tmp_path / "templates" / "partials" / "memu" / "piece.md"
        partial.parent.mkdir(parents=True)
        partial.write_text("{{ anything }}\n")
        assert TemplateLines(tmp_path).behind("uses `loom_op`", "loom_op", "memu") == ()
