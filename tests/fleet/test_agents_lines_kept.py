"""Nothing an agent wrote is lost (REL-10, REL-11, REL-15), on workspaces made by real init runs.

A file too large to read whole is never merged or written; a merge base the workspace holds is
trusted only when it is the text its digest names; and a ``--conflict inline`` run killed after
marking a file, before its manifest, is finished by the next run, so the person's resolution
of the markers stands.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from provisioner.backends import MEMU_TOOLS
from provisioner.workspace.fs import MAX_READ_BYTES
from provisioner.workspace.merge import BASES_PATH, MARKED
from provisioner.workspace.render import MANIFEST_PATH
from provisioner.workspace.state import JOURNAL_PATH
from tests.fleet.provisioning import (
    AGENT_LINE,
    CURRENT_LINE,
    EARLIER_LINE,
    Provision,
    add_agent_line,
    run_main,
)
from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
# The agent's long notes: lines of 1 KiB, enough of them to pass the read cap.
LONG_NOTE = "Agent's long note. " * 53 + "\n"


def memu_tool_named(text: str) -> bool:
    return any(name in text for name in MEMU_TOOLS)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def past_the_read_cap(path: Path) -> None:
    """The agent's file grown past the read cap, its own lines kept at the top."""
    add_agent_line(path)
    lines = MAX_READ_BYTES // len(LONG_NOTE) + 64
    with path.open("a", encoding="utf-8") as handle:
        handle.write(LONG_NOTE * lines)
    assert path.stat().st_size > MAX_READ_BYTES


class TestAFilePastTheReadCap:
    """REL-10: never merged, re-worded or truncated; a conflict left as it is, named."""

    def test_a_backend_switch_leaves_it_whole_and_names_it_as_a_conflict(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        agents = tmp_path / "ws" / "AGENTS.md"
        past_the_read_cap(agents)
        before = digest(agents)
        ran = provision("ws", "--memory-backend", "loom", "--conflict", "inline", "--json")
        assert digest(agents) == before
        summary = ran.json()
        assert summary["merged"] == []
        [conflict] = summary["conflicts"]
        assert conflict["path"] == "AGENTS.md"
        assert "larger than 16 MiB" in conflict["preview"]
        text = provision("ws", "--memory-backend", "loom").stdout
        assert "conflict   AGENTS.md (too large to read whole; left as it is)" in text
        assert digest(agents) == before

    def test_fleet_update_names_it_and_updates_the_rest(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        agents = tmp_path / "ws" / "AGENTS.md"
        past_the_read_cap(agents)
        before = digest(agents)
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text(yaml.safe_dump([{"workspace": "ws", "config_dir": "cfg"}]))
        ran = run_main(["fleet", "update", "--inventory", str(inventory), "--json"])
        assert ran.status == 1, ran.stderr
        [workspace] = ran.json()["workspaces"]
        assert workspace["status"] == "conflict"
        actions = {f["path"]: f["action"] for f in workspace["files"]}
        assert actions["AGENTS.md"] == "conflict"
        assert actions["TOOLS.md"] == "reword"  # the rest of the workspace is switched
        assert digest(agents) == before
        assert not memu_tool_named((tmp_path / "ws" / "TOOLS.md").read_text())


class TestAMergeBaseIsTrustedOnlyWhenItMatchesItsDigest:
    """REL-11: a base replaced in the workspace never makes a merge drop the agent's lines."""

    def replace_base_by_the_file(self, workspace: Path) -> None:
        """The base kept for AGENTS.md replaced by the file as it is now, under the same key."""
        manifest = json.loads((workspace / MANIFEST_PATH).read_text())
        bases = json.loads((workspace / BASES_PATH).read_text())
        key = manifest["files"]["AGENTS.md"]
        assert key in bases["texts"]
        bases["texts"][key] = (workspace / "AGENTS.md").read_text()
        (workspace / BASES_PATH).write_text(json.dumps(bases))

    def test_the_base_is_derived_again_and_the_agents_line_is_kept(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        self.replace_base_by_the_file(tmp_path / "ws")
        ran = provision("ws", "--memory-backend", "loom", "--json")
        text = agents.read_text()
        assert AGENT_LINE in text and not memu_tool_named(text) and "Loom" in text
        assert ran.json()["merged"] == ["AGENTS.md"]
        kept = json.loads((tmp_path / "ws" / BASES_PATH).read_text())["texts"]
        assert all(
            "sha256:" + hashlib.sha256(text.encode()).hexdigest() == key
            for key, text in kept.items()
        )

    def test_a_base_that_cannot_be_derived_again_is_a_conflict_left_as_it_is(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        provision("ws", assets=older_assets)
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        self.replace_base_by_the_file(tmp_path / "ws")
        before = agents.read_bytes()
        ran = provision("ws", "--json")  # this version's AGENTS.md differs from the earlier one
        assert agents.read_bytes() == before
        assert [c["path"] for c in ran.json()["conflicts"]] == ["AGENTS.md"]


# Runs the command line and kills itself (SIGKILL) just after (or just before) the rename
# that puts the file named by argv[1] in place: argv[2] is "after" or "before".
KILL_AT_RENAME = """
import os, signal, sys
name, when = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
real = os.replace
def replace(source, target, *args, **kwargs):
    if target == name and when == "before":
        os.kill(os.getpid(), signal.SIGKILL)
    real(source, target, *args, **kwargs)
    if target == name and when == "after":
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from provisioner.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


class TestAnInterruptedInlineRunIsFinishedByTheNext:
    """REL-15: killed after marking a file and before its manifest, the run's new base stands."""

    def inline_run_killed(self, tmp_path: Path, when: str) -> subprocess.CompletedProcess:
        home = tmp_path / "home"
        env = clean_environment(home, {"PYTHONPATH": str(REPO_ROOT)})
        argv = ["init", "--non-interactive", "--conflict", "inline"]
        argv += ["--workspace", str(tmp_path / "ws"), "--config-dir", str(tmp_path / "cfg")]
        return subprocess.run(
            [sys.executable, "-c", KILL_AT_RENAME, "AGENTS.md", when, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    def edited_where_the_template_changed(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> Path:
        provision("ws", assets=older_assets)
        agents = tmp_path / "ws" / "AGENTS.md"
        agents.write_text(agents.read_text().replace(EARLIER_LINE, "This guide is mine now."))
        return agents

    def test_the_resolved_file_is_the_agents_not_a_conflict_again(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        agents = self.edited_where_the_template_changed(provision, tmp_path, older_assets)
        killed = self.inline_run_killed(tmp_path, "after")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert (tmp_path / "ws" / JOURNAL_PATH).exists()  # the manifest was never replaced
        lines = agents.read_text().splitlines(keepends=True)
        start = next(i for i, line in enumerate(lines) if line.startswith(MARKED))
        end = next(i for i, line in enumerate(lines) if line.startswith(">>>>>>>"))
        resolved = "This guide is mine, and says how you keep things.\n"
        agents.write_text("".join([*lines[:start], resolved, *lines[end + 1 :]]))
        after_resolving = agents.read_bytes()
        ran = provision("ws", "--json")
        summary = ran.json()
        assert summary["conflicts"] == [] and summary["merged"] == []
        assert "AGENTS.md" in [kept["path"] for kept in summary["kept"]]
        assert agents.read_bytes() == after_resolving
        assert not (tmp_path / "ws" / JOURNAL_PATH).exists()

    def test_a_file_killed_before_its_marking_is_still_a_conflict(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        agents = self.edited_where_the_template_changed(provision, tmp_path, older_assets)
        before = agents.read_bytes()
        killed = self.inline_run_killed(tmp_path, "before")
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert agents.read_bytes() == before
        ran = provision("ws", "--json")
        [conflict] = ran.json()["conflicts"]  # the template's change still waits for a person
        assert conflict["path"] == "AGENTS.md"
        assert "This guide is mine now." in conflict["preview"]
        assert CURRENT_LINE in conflict["preview"]
        assert not any(marker in agents.read_text() for marker in MARKERS)
