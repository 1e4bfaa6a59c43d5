"""REL-12: a damaged, hostile or oversized record of init's in a workspace (the manifest, the
journal, the merge bases) is that workspace's error in one line, never read as absent, never a
traceback; in a fleet the other workspaces go on and the JSON report is whole.

Every workspace is made by a real init run; the records are then damaged on disk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from provisioner.workspace.fs import MAX_READ_BYTES
from provisioner.workspace.merge import BASES_PATH
from provisioner.workspace.render import MANIFEST_PATH
from provisioner.workspace.state import JOURNAL_PATH
from tests.fleet.provisioning import Provision, Ran, run_main, tree

DEPTH = 100_000  # far past the interpreter's recursion limit


def nested(depth: int = DEPTH) -> str:
    return "[" * depth + "]" * depth


def manifest_with(workspace: Path, **changes: object) -> str:
    recorded = json.loads((workspace / MANIFEST_PATH).read_text())
    recorded.update(changes)
    return json.dumps(recorded)


def huge(_workspace: Path) -> str:
    return json.dumps({"format": 1, "answers": {}, "files": {}, "pad": "x" * MAX_READ_BYTES})


MANIFESTS: dict[str, Callable[[Path], str]] = {
    "garbage": lambda _ws: "garbage\n",
    "a newer format": lambda ws: manifest_with(ws, format=2),
    "no format": lambda ws: manifest_with(ws, format=None),
    "files of the wrong type": lambda ws: manifest_with(ws, files=["AGENTS.md"]),
    "a digest of the wrong type": lambda ws: manifest_with(ws, files={"AGENTS.md": 1}),
    "answers of the wrong type": lambda ws: manifest_with(ws, answers="worker"),
    "an array": lambda _ws: "[]\n",
    "deep nesting": lambda _ws: nested(),
    "moderate nesting": lambda _ws: json.dumps({"format": 1, "answers": json.loads(nested(50))}),
    "not UTF-8": lambda _ws: '{"format": 1, "answers": {"agent_name": "\udcff"}}',
    "larger than the read cap": huge,
}


def one_line(ran: Ran, *fragments: str, status: int = 2) -> str:
    """The command's single stderr line, with its status, holding every fragment."""
    assert ran.status == status, (ran.status, ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr
    [line] = ran.stderr.splitlines()
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


def write_text(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))


class TestADamagedManifest:
    @pytest.mark.parametrize("damage", list(MANIFESTS))
    def test_init_refuses_a_worker_workspace_and_writes_nothing(
        self, provision: Provision, tmp_path: Path, damage: str
    ) -> None:
        """Read as absent, the manifest gave a worker the personal profile's IDENTITY.md and
        USER.md, and turned every other file into a kept edit for good."""
        workspace = tmp_path / "ws"
        provision("ws", "--profile", "worker")
        write_text(workspace / MANIFEST_PATH, MANIFESTS[damage](workspace))
        before = tree(workspace)
        ran = provision("ws", "--json", check=False)
        one_line(ran, str(workspace / MANIFEST_PATH))
        assert tree(workspace) == before
        assert not (workspace / "USER.md").exists()

    def test_the_line_says_what_is_wrong_and_what_to_do(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        (tmp_path / "ws" / MANIFEST_PATH).write_text("garbage\n")
        line = one_line(provision("ws", check=False), "damaged", "not JSON")
        assert "move it aside" in line and "--profile" in line

    def test_a_newer_format_is_named_as_such(self, provision: Provision, tmp_path: Path) -> None:
        provision("ws")
        (tmp_path / "ws" / MANIFEST_PATH).write_text(manifest_with(tmp_path / "ws", format=2))
        one_line(provision("ws", check=False), "newer version", "format 2")

    def test_init_check_and_diff_answer_it_in_one_line(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        (tmp_path / "ws" / MANIFEST_PATH).write_text(nested())
        one_line(provision("ws", "--check", check=False), MANIFEST_PATH, "nested too deep")
        one_line(run_main(["diff", "--workspace", str(tmp_path / "ws")]), MANIFEST_PATH)

    def test_doctor_fails_the_check_and_never_advises_a_plain_init(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        (tmp_path / "ws" / MANIFEST_PATH).write_text("garbage\n")
        argv = ["doctor", "--offline", "--json", "--workspace", str(tmp_path / "ws")]
        ran = run_main([*argv, "--config-dir", str(tmp_path / "cfg")])
        assert ran.status == 1 and "Traceback" not in ran.stderr
        checks = {check["id"]: check for check in ran.json()["checks"]}
        manifest = checks["workspace.manifest"]
        assert manifest["status"] == "ERR"
        assert MANIFEST_PATH in manifest["message"] and "damaged" in manifest["message"]
        assert "not provisioned" not in manifest["message"]
        assert "move it aside" in manifest["advice"].lower()
        assert "workspace.drift" not in checks  # left to workspace.manifest


class TestADamagedJournalOrBases:
    @pytest.mark.parametrize(
        ("record", "text"),
        [
            (JOURNAL_PATH, "garbage\n"),
            (JOURNAL_PATH, nested()),
            (JOURNAL_PATH, json.dumps({"answers": {}, "files": {"AGENTS.md": ["x"]}})),
            (JOURNAL_PATH, json.dumps({"answers": {}, "files": {}, "inline": {"AGENTS.md": 1}})),
            (BASES_PATH, nested()),
            (BASES_PATH, json.dumps({"format": 1, "texts": {"sha256:00": 7}})),
            (BASES_PATH, json.dumps({"format": 1, "texts": []})),
            (BASES_PATH, json.dumps({"texts": {}})),
        ],
        ids=[
            "journal garbage",
            "journal deep nesting",
            "journal files of the wrong type",
            "journal inline of the wrong type",
            "bases deep nesting",
            "bases text of the wrong type",
            "bases texts of the wrong type",
            "bases without a format",
        ],
    )
    def test_init_refuses_the_workspace_in_one_line_naming_the_record(
        self, provision: Provision, tmp_path: Path, record: str, text: str
    ) -> None:
        workspace = tmp_path / "ws"
        provision("ws")
        (workspace / record).write_text(text)
        before = tree(workspace)
        ran = provision("ws", "--memory-backend", "loom", check=False)
        one_line(ran, str(workspace / record), "damaged")
        assert tree(workspace) == before

    def test_doctor_names_a_damaged_bases_file_as_a_failing_check(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        (tmp_path / "ws" / BASES_PATH).write_text(nested())
        argv = ["doctor", "--offline", "--json", "--workspace", str(tmp_path / "ws")]
        ran = run_main([*argv, "--config-dir", str(tmp_path / "cfg")])
        assert ran.status == 1 and "Traceback" not in ran.stderr
        checks = {check["id"]: check for check in ran.json()["checks"]}
        drift = checks["workspace.drift"]
        assert drift["status"] == "ERR" and BASES_PATH in drift["message"]
        assert "move it aside" in drift["advice"].lower()


class TestInAFleet:
    @pytest.mark.parametrize("command", ["check", "update"])
    def test_the_damaged_workspace_is_an_error_and_the_others_go_on(
        self, provision: Provision, tmp_path: Path, command: str
    ) -> None:
        names = ["a", "b", "c", "d"]
        for name in names:
            provision(name)
        (tmp_path / "b" / BASES_PATH).write_text(nested())
        (tmp_path / "c" / MANIFEST_PATH).write_text("garbage\n")
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text(yaml.safe_dump([{"workspace": n, "config_dir": "cfg"} for n in names]))
        ran = run_main(["fleet", command, "--inventory", str(inventory), "--json"])
        assert ran.status == 2 and "Traceback" not in ran.stderr
        document = ran.json()
        statuses = {w["workspace"]: w["status"] for w in document["workspaces"]}
        fine = "up_to_date" if command == "update" else "drift"
        assert statuses == {"a": fine, "b": "error", "c": "error", "d": fine}
        errors = {w["workspace"]: w["error"] for w in document["workspaces"] if "error" in w}
        assert BASES_PATH in errors["b"] and MANIFEST_PATH in errors["c"]
        assert all("damaged" in error and "\n" not in error for error in errors.values())
        assert document["summary"]["error"] == 2
