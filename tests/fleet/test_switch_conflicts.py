"""A backend switch across a fleet, and the agents' edits near the wording it changes (FLEET-3).

AGENTS.md ends with "## Your own notes", a section every backend and profile words the same and
no version changes, so a line an agent appends at the end lands after text no template change
touches: it merges cleanly through a switch from memU to Loom, and through a version that
changes the bullet before the section. An edit where the switch re-words is a conflict: the
file is left as the agent wrote it, the rest of the workspace is switched, and the report names
the file a person must resolve, in its text and its JSON. Real workspaces, made by init.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provisioner.backends import MEMU_TOOLS
from tests.fleet.provisioning import Provision, run_main

OWN_NOTES = "## Your own notes\n"
APPENDED = "Answer in short paragraphs; the person reads on a phone.\n"
LAST_BULLET = (
    "- Say so when you are unsure. A wrong answer given confidently costs more than a question.\n"
)
OLDER_BULLET = "- Say so when you are unsure.\n"


def instance(tmp_path: Path, provision: Provision, profile: str, **kwargs: Path) -> Path:
    """A memU instance (workspace ``ws``, configuration ``config``) made by init, and an
    inventory naming it."""
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.yaml").write_text("memory:\n  backend: memu\n")
    provision("ws", "--config-dir", str(config), "--profile", profile, **kwargs)
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump([{"workspace": "ws", "config_dir": "config"}]))
    return inventory


def switch_to_loom(tmp_path: Path) -> None:
    (tmp_path / "config" / "config.yaml").write_text("memory:\n  backend: loom\n")


def append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)


def memu_tools_in(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {tool for tool in MEMU_TOOLS if tool in text}


@pytest.mark.parametrize("profile", ["personal", "worker"])
def test_a_line_appended_to_agents_md_merges_cleanly_across_the_switch(
    tmp_path: Path, provision: Provision, profile: str
) -> None:
    inventory = instance(tmp_path, provision, profile)
    agents = tmp_path / "ws" / "AGENTS.md"
    assert agents.read_text().split("\n## ")[-1].startswith(OWN_NOTES[3:])  # the last section
    append(agents, APPENDED)
    switch_to_loom(tmp_path)
    ran = run_main(["fleet", "update", "--inventory", str(inventory), "--json"])
    assert ran.status == 0, ran.stdout
    workspace = ran.json()["workspaces"][0]
    actions = {f["path"]: f["action"] for f in workspace["files"]}
    assert workspace["status"] == "up_to_date" and "resolve" not in workspace
    assert actions["AGENTS.md"] == "merge"
    assert actions["TOOLS.md"] == actions["MEMORY.md"] == "reword"
    text = agents.read_text()
    assert text.endswith(APPENDED) and text.index(OWN_NOTES) < text.index(APPENDED)
    assert memu_tools_in(agents) == set()


def test_a_line_appended_while_a_version_changes_the_last_bullet_merges_cleanly(
    tmp_path: Path, provision: Provision, assets_copy: Path
) -> None:
    """The commonest conflict once: the agent's line after the guide's last bullet, which the
    next version re-worded. With the notes section between them, they no longer touch."""
    template = assets_copy / "templates" / "workspace" / "AGENTS.md.jinja"
    text = template.read_text(encoding="utf-8")
    assert LAST_BULLET in text
    template.write_text(text.replace(LAST_BULLET, OLDER_BULLET), encoding="utf-8")
    inventory = instance(tmp_path, provision, "personal", assets=assets_copy)
    agents = tmp_path / "ws" / "AGENTS.md"
    append(agents, APPENDED)
    switch_to_loom(tmp_path)
    ran = run_main(["fleet", "update", "--inventory", str(inventory), "--json"])
    assert ran.status == 0, ran.stdout
    merged = agents.read_text()
    assert LAST_BULLET in merged and OLDER_BULLET not in merged and merged.endswith(APPENDED)


def test_an_edit_where_the_switch_rewords_is_named_for_a_person_to_resolve(
    tmp_path: Path, provision: Provision
) -> None:
    inventory = instance(tmp_path, provision, "personal")
    agents = tmp_path / "ws" / "AGENTS.md"
    text = agents.read_text()
    edited = text.replace("**Long-term memory** is memU,", "**Long-term memory**, mine, is memU,")
    assert edited != text
    agents.write_text(edited)
    switch_to_loom(tmp_path)
    ran = run_main(["fleet", "update", "--inventory", str(inventory), "--json"])
    assert ran.status == 1
    workspace = ran.json()["workspaces"][0]
    assert workspace["status"] == "conflict" and workspace["resolve"] == ["AGENTS.md"]
    assert agents.read_text() == edited  # left as the agent wrote it, memU's tools and all
    assert memu_tools_in(agents) != set()
    for switched in ("TOOLS.md", "MEMORY.md"):  # the rest of the workspace is switched
        assert memu_tools_in(tmp_path / "ws" / switched) == set()
    text_report = run_main(["fleet", "check", "--inventory", str(inventory)])
    assert text_report.status == 1
    assert "  resolve by hand: AGENTS.md (" in text_report.stdout
