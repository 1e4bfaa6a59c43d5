"""FLEET-3: a template change reaches a file the agent edited, by a three-way merge.

Every workspace here is made by real init runs; "an earlier version" is init run on the
templates of ``older_assets``.
"""

from __future__ import annotations

import json
from pathlib import Path

from provisioner.backends import MEMU_TOOLS
from provisioner.workspace.merge import BASES_PATH, MARKED, three_way
from tests.fleet.provisioning import (
    AGENT_LINE,
    CURRENT_LINE,
    EARLIER_LINE,
    Provision,
    add_agent_line,
    run_main,
)

MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


def memu_tool_named(text: str) -> bool:
    return any(name in text for name in MEMU_TOOLS)


class TestACleanMergeIsWritten:
    def test_a_backend_switch_brings_the_new_wording_into_an_edited_file(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        assert memu_tool_named(agents.read_text())
        ran = provision("ws", "--memory-backend", "loom")
        text = agents.read_text()
        assert AGENT_LINE in text
        assert not memu_tool_named(text)
        assert "Loom" in text
        assert not any(marker in text for marker in MARKERS)
        assert "merged     AGENTS.md" in ran.stdout

    def test_a_new_versions_wording_change_reaches_an_edited_file(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        provision("ws", assets=older_assets)
        agents = tmp_path / "ws" / "AGENTS.md"
        assert EARLIER_LINE in agents.read_text()
        add_agent_line(agents)
        ran = provision("ws", "--json")
        text = agents.read_text()
        assert CURRENT_LINE in text and AGENT_LINE in text
        assert ran.json()["merged"] == ["AGENTS.md"]

    def test_a_merged_file_stays_the_agents_and_is_kept_by_the_next_init(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        provision("ws", "--memory-backend", "loom")
        merged = agents.read_bytes()
        ran = provision("ws", "--memory-backend", "loom", "--json")
        assert agents.read_bytes() == merged
        assert [kept["path"] for kept in ran.json()["kept"]] == ["AGENTS.md"]

    def test_a_switch_back_merges_again_from_the_base_the_last_run_kept(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        provision("ws", "--memory-backend", "loom")
        provision("ws", "--memory-backend", "memu")
        text = agents.read_text()
        assert AGENT_LINE in text and memu_tool_named(text) and "Loom" not in text


class TestAConflictIsLeftAsItIs:
    def edited_where_the_template_changed(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> Path:
        provision("ws", assets=older_assets)
        agents = tmp_path / "ws" / "AGENTS.md"
        text = agents.read_text()
        agents.write_text(text.replace(EARLIER_LINE, "This guide is mine now."))
        return agents

    def test_the_file_is_not_touched_and_the_report_shows_a_diff3_preview(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        agents = self.edited_where_the_template_changed(provision, tmp_path, older_assets)
        before = agents.read_bytes()
        ran = provision("ws", "--json")
        assert agents.read_bytes() == before
        [conflict] = ran.json()["conflicts"]
        assert conflict["path"] == "AGENTS.md"
        preview = conflict["preview"]
        for marker in MARKERS:
            assert marker in preview
        assert "This guide is mine now." in preview
        assert EARLIER_LINE in preview and CURRENT_LINE in preview

    def test_the_conflict_is_reported_again_until_someone_resolves_it(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        agents = self.edited_where_the_template_changed(provision, tmp_path, older_assets)
        provision("ws")
        ran = provision("ws", "--json")
        assert [c["path"] for c in ran.json()["conflicts"]] == ["AGENTS.md"]
        assert MARKED not in agents.read_text()

    def test_conflict_inline_writes_markers_for_a_person_to_resolve(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        agents = self.edited_where_the_template_changed(provision, tmp_path, older_assets)
        provision("ws", "--conflict", "inline")
        text = agents.read_text()
        assert text.count(MARKED) == 1
        for marker in MARKERS:
            assert marker in text
        still = run_main(
            [
                "init",
                "--check",
                "--workspace",
                str(tmp_path / "ws"),
                "--config-dir",
                str(tmp_path / "cfg"),
            ]
        )
        assert still.status == 1 and "conflict" in still.stdout

    def test_once_the_markers_are_resolved_the_file_is_the_agents_again(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        agents = self.edited_where_the_template_changed(provision, tmp_path, older_assets)
        provision("ws", "--conflict", "inline")
        lines = agents.read_text().splitlines(keepends=True)
        start = next(i for i, line in enumerate(lines) if line.startswith("<<<<<<<"))
        end = next(i for i, line in enumerate(lines) if line.startswith(">>>>>>>"))
        resolved = [
            *lines[:start],
            "This guide is mine, and says how you keep things.\n",
            *lines[end + 1 :],
        ]
        agents.write_text("".join(resolved))
        ran = provision("ws", "--json")
        assert ran.json()["conflicts"] == [] and ran.json()["merged"] == []
        assert "AGENTS.md" in [kept["path"] for kept in ran.json()["kept"]]


class TestTheBaseIsWhatThePackageLastWrote:
    def test_each_text_init_wrote_is_kept_in_the_workspace(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        kept = json.loads((tmp_path / "ws" / BASES_PATH).read_text())["texts"]
        assert (tmp_path / "ws" / "AGENTS.md").read_text() in kept.values()

    def test_without_kept_bases_a_backend_switch_merges_from_the_recorded_answers(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        (tmp_path / "ws" / BASES_PATH).unlink()  # as a workspace of an earlier version
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        provision("ws", "--memory-backend", "loom")
        text = agents.read_text()
        assert AGENT_LINE in text and not memu_tool_named(text)

    def test_an_unknown_base_is_a_conflict_never_a_guess(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        provision("ws", assets=older_assets)
        (tmp_path / "ws" / BASES_PATH).unlink()
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        before = agents.read_bytes()
        ran = provision("ws", "--json")
        assert agents.read_bytes() == before
        [conflict] = ran.json()["conflicts"]
        assert "no base recorded" in conflict["preview"]

    def test_recorded_answers_that_cannot_be_rendered_again_are_no_base(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        (tmp_path / "ws" / BASES_PATH).unlink()
        manifest = tmp_path / "ws" / ".nerve" / "provisioned.json"
        recorded = json.loads(manifest.read_text())
        recorded["answers"]["agent_name"] = {"not": "a name"}  # the agent can edit the manifest
        manifest.write_text(json.dumps(recorded))
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        before = agents.read_bytes()
        ran = provision("ws", "--memory-backend", "loom", "--data", "agent_name=Nerve", "--json")
        assert agents.read_bytes() == before
        assert [c["path"] for c in ran.json()["conflicts"]] == ["AGENTS.md"]

    def test_a_damaged_bases_file_is_refused_and_never_costs_an_agents_line(
        self, provision: Provision, tmp_path: Path, older_assets: Path
    ) -> None:
        """REL-12: one line naming the file, and nothing written until a person looks."""
        provision("ws", assets=older_assets)
        (tmp_path / "ws" / BASES_PATH).write_text("{not json")
        agents = tmp_path / "ws" / "AGENTS.md"
        add_agent_line(agents)
        before = agents.read_bytes()
        ran = provision("ws", "--json", check=False)
        assert ran.status == 2 and ran.stdout == ""
        [line] = ran.stderr.splitlines()
        assert BASES_PATH in line and "damaged" in line
        assert agents.read_bytes() == before


class TestTheMergeOfTwoTexts:
    def test_a_last_line_without_a_newline_merges_without_joining_lines(self) -> None:
        outcome = three_way(b"a\nb", b"a\nb2", b"a\nb3")
        assert outcome.action == "conflict" and outcome.content is not None
        marked = outcome.content.decode()
        assert "b2\n|||||||" in marked and "b\n=======" in marked

    def test_the_merged_text_ends_as_the_agent_left_it(self) -> None:
        outcome = three_way(b"one\ntwo\n", b"zero\none\ntwo", b"one\ntwo\nthree\n")
        assert outcome.action == "merge"
        assert outcome.content == b"zero\none\ntwo\nthree"

    def test_text_that_is_not_utf8_is_a_conflict(self) -> None:
        assert three_way(b"a\n", b"\xff\n", b"b\n").action == "conflict"
