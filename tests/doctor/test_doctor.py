"""``nerve doctor`` through the real CLI: configuration, workspace, memU and Loom checks (DOC-1).

Network checks against a loopback gateway are in ``test_doctor_network.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provisioner.doctor.check import ADVICE_PREFIX, Check, Report, one_line
from provisioner.doctor.workspace import MEMORY_MD_LINES_SHOWN, MEMORY_MD_MAX_BYTES
from tests.support.processes import RunNerve, assert_one_line_error, clean_environment


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One memU workspace provisioned by the real ``nerve-provisioner init``, copied by each
    test."""
    root = tmp_path_factory.mktemp("provisioned")
    cfg = ["--config-dir", str(root / "cfg")]
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("nerve-provisioner")),
            "init",
            "--non-interactive",
            "--workspace",
            str(root / "ws"),
            *cfg,
        ],
        capture_output=True,
        text=True,
        env=clean_environment(root),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return root / "ws"


class Instance:
    """A workspace and a configuration folder for one test, and doctor run on them."""

    def __init__(self, root: Path, run_nerve: RunNerve, provisioned: Path) -> None:
        self.workspace = root / "ws"
        self.config_dir = root / "cfg"
        self.config_dir.mkdir(parents=True)
        shutil.copytree(provisioned, self.workspace, symlinks=True)
        self._run = run_nerve

    def configure(self, text: str, name: str = "config.yaml") -> None:
        (self.config_dir / name).write_text(text, encoding="utf-8")

    def doctor(self, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return self._run(
            "doctor",
            "--workspace",
            str(self.workspace),
            "--config-dir",
            str(self.config_dir),
            *flags,
            env=env,
        )

    def doctor_json(self, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        result = self.doctor("--json", *flags, env=env)
        assert result.returncode in (0, 1), result.stderr
        report = json.loads(result.stdout)
        assert report["summary"]["exit_status"] == result.returncode
        return report


@pytest.fixture
def instance(tmp_path: Path, run_nerve: RunNerve, provisioned: Path) -> Instance:
    return Instance(tmp_path / "instance", run_nerve, provisioned)


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check for check in report["checks"]}


def assert_text_matches_json(text: str, report: dict[str, Any]) -> None:
    """Every text line is a JSON check, its advice, or the summary — in the same order."""
    expected: list[str] = []
    for check in report["checks"]:
        expected.append(f"[{check['status']}]".ljust(6) + f" {check['id']}: {check['message']}")
        if check["advice"]:
            expected.append(ADVICE_PREFIX + check["advice"])
    summary = report["summary"]
    expected.append(f"{summary['passed']}/{summary['total']} checks passed")
    assert text.splitlines() == expected


LOOM_CONFIG = """\
memory:
  backend: loom
  loom:
    namespace: ada
mcp_gateway_url: http://127.0.0.1:9
"""


class TestOutput:
    def test_every_text_line_is_a_json_check_its_advice_or_the_summary(
        self, instance: Instance
    ) -> None:
        """DOC-1: text and --json carry the same checks; WARN/ERR lines have advice."""
        instance.configure(LOOM_CONFIG.replace("ada", "ada\n    dashboard_url: /relative"))
        text = instance.doctor("--offline")
        report = instance.doctor_json("--offline")
        statuses = {check["status"] for check in report["checks"]}
        assert statuses == {"OK", "WARN"}, "the scenario must show OK and WARN lines"
        assert_text_matches_json(text.stdout, report)

    def test_the_json_schema_is_the_documented_one(self, instance: Instance) -> None:
        """DOC-1: {"schema": 1, "checks": [{id, status, message, advice, source}], "summary"}."""
        report = instance.doctor_json("--offline")
        assert set(report) == {"schema", "status", "checks", "summary"}
        assert report["schema"] == 1
        worst = {c["status"] for c in report["checks"]}
        assert report["status"] == next(s for s in ("ERR", "WARN", "OK") if s in worst)
        for check in report["checks"]:
            assert set(check) == {"id", "status", "message", "advice", "source"}
            assert check["status"] in ("OK", "WARN", "ERR")
            assert (check["advice"] is None) == (check["status"] == "OK")
        ids = [check["id"] for check in report["checks"]]
        assert len(ids) == len(set(ids)), "check ids are unique"
        summary = report["summary"]
        assert summary["total"] == len(report["checks"])
        assert summary["passed"] == sum(c["status"] == "OK" for c in report["checks"])

    def test_a_hostile_value_stays_on_its_own_line_without_terminal_escapes(
        self, instance: Instance
    ) -> None:
        """A value with a line break and an escape sequence cannot forge a line of its own."""
        instance.configure(
            'memory:\n  backend: loom\n  loom:\n    dashboard_url: "x\\n[OK] all good\\u001b[2J"\n'
        )
        result = instance.doctor("--offline")
        assert "\x1b" not in result.stdout
        assert not any(line.startswith("[OK] all good") for line in result.stdout.splitlines())
        assert_text_matches_json(result.stdout, instance.doctor_json("--offline"))

    def test_a_terminal_that_cannot_show_the_arrow_still_gets_the_whole_report(
        self, instance: Instance
    ) -> None:
        instance.configure("memory:\n  backend: loom\n")
        result = instance.doctor("--offline", env={"PYTHONIOENCODING": "ascii"})
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert "\\u2192 set mcp_gateway_url" in result.stdout

    def test_one_line_shows_invisible_characters_and_caps_the_length(self) -> None:
        assert one_line("a\nb\u202ec\x1b") == "a\\x0ab\\u202ec\\x1b"
        assert one_line("x" * 1000, 20) == "x" * 19 + "…"

    def test_a_warning_or_error_without_advice_cannot_be_built(self) -> None:
        with pytest.raises(ValueError, match="says nothing to do"):
            Check("x", "WARN", "something")
        assert Report((Check("a", "OK", "fine"), Check("b", "ERR", "bad", "fix"))).exit_status == 1


class TestExitStatus:
    def test_a_clean_memu_instance_passes_every_check_and_exits_0(self, instance: Instance) -> None:
        instance.configure("memory:\n  backend: memu\n")
        result = instance.doctor()
        assert result.returncode == 0, result.stdout
        report = instance.doctor_json()
        passed, total = report["summary"]["passed"], report["summary"]["total"]
        assert passed == total
        assert result.stdout.splitlines()[-1] == f"{total}/{total} checks passed"

    def test_any_err_exits_1(self, instance: Instance) -> None:
        """DOC-1: Loom without a gateway URL is an ERR, and the exit status is 1."""
        instance.configure("memory:\n  backend: loom\n")
        result = instance.doctor("--offline")
        assert result.returncode == 1
        assert "[ERR]  loom.gateway:" in result.stdout

    def test_a_bad_flag_is_one_line_and_exit_2(self, instance: Instance) -> None:
        assert_one_line_error(instance.doctor("--frobnicate"), "--frobnicate")

    def test_a_configuration_that_does_not_load_is_an_err_not_a_traceback(
        self, instance: Instance
    ) -> None:
        instance.configure("memory:\n  backend: foo\n")
        result = instance.doctor()
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        config = by_id(instance.doctor_json())["config.load"]
        assert config["status"] == "ERR"
        assert "'foo' is not a memory backend" in config["message"]
        assert config["source"] == str(instance.config_dir / "config.yaml")


class TestConfiguration:
    def test_files_read_and_skipped_by_lockdown_are_named(self, instance: Instance) -> None:
        """DOC-1, CONF-3: which files were read, and which lockdown skipped."""
        instance.configure("memory:\n  backend: memu\n")
        instance.configure("memory:\n  backend: loom\n", name="config.local.yaml")
        report = instance.doctor_json("--offline", env={"NERVE_LOCKDOWN": "1"})
        files = by_id(report)["config.files"]["message"]
        assert f"read {instance.workspace / 'config/settings.yaml'}, " in files
        assert f"not read: {instance.config_dir / 'config.local.yaml'}" in files
        assert by_id(report)["config.memory.backend"]["message"].startswith(
            "memory.backend = memu, from"
        )

    def test_each_value_names_the_layer_or_variable_it_came_from(self, instance: Instance) -> None:
        """DOC-1: memory.backend, mcp_gateway_url and each memory.loom key with its origin."""
        instance.configure(
            "memory:\n  backend: ${NERVE_MEMORY_BACKEND:-memu}\n"
            "  loom:\n    namespace: ${NS:-ada}\n    org: acme\n"
            "mcp_gateway_url: http://127.0.0.1:9\n"
        )
        instance.configure("memory:\n  loom:\n    org: local-org\n", name="config.local.yaml")
        config_file = instance.config_dir / "config.yaml"
        local_file = instance.config_dir / "config.local.yaml"
        checks = by_id(instance.doctor_json("--offline", env={"NERVE_MEMORY_BACKEND": "loom"}))
        assert checks["config.memory.backend"]["source"] == (
            f"${{NERVE_MEMORY_BACKEND}} in {config_file}"
        )
        assert checks["config.memory.loom.namespace"]["source"] == (
            f"${{NS:-ada}} (NS unset, so the default) in {config_file}"
        )
        assert checks["config.memory.loom.org"]["message"] == (
            f"memory.loom.org = local-org, from {local_file}"
        )
        assert checks["config.mcp_gateway_url"]["source"] == str(config_file)
        assert checks["config.memory.loom.defer_extraction"]["source"] == "default"
        assert checks["config.memory.loom.dashboard_url"]["message"].endswith("the default")

    def test_the_loom_keys_are_not_listed_under_memu(self, instance: Instance) -> None:
        checks = by_id(instance.doctor_json("--offline"))
        assert not [name for name in checks if name.startswith("config.memory.loom.")]

    def test_a_loader_warning_is_a_warn_with_advice(self, instance: Instance) -> None:
        """CONF-7: an unknown key under memory warns, and doctor says so."""
        instance.configure("memory:\n  backend: memu\n  colour: blue\n")
        warning = by_id(instance.doctor_json("--offline"))["config.warning.memory.colour"]
        assert warning["status"] == "WARN"
        assert "memory.colour: unknown key" in warning["message"]


class TestWorkspace:
    def test_the_recorded_profile_and_wording_are_shown(self, instance: Instance) -> None:
        checks = by_id(instance.doctor_json("--offline"))
        assert checks["workspace.profile"]["message"].startswith(
            "profile personal, files worded for memu"
        )
        assert checks["workspace.files"]["status"] == "OK"

    def test_edited_and_missing_files_are_counted_and_missing_ones_warn(
        self, instance: Instance
    ) -> None:
        """INIT-5: files still as shipped, edited, or missing."""
        (instance.workspace / "SOUL.md").write_text("mine now\n", encoding="utf-8")
        (instance.workspace / "USER.md").unlink()
        files = by_id(instance.doctor_json("--offline"))["workspace.files"]
        assert files["status"] == "WARN"
        assert "1 edited (SOUL.md)" in files["message"]
        assert "1 missing (USER.md)" in files["message"]
        assert files["advice"].startswith("run python -m provisioner init --workspace")

    def test_a_wording_that_disagrees_with_the_backend_gives_the_init_command(
        self, instance: Instance
    ) -> None:
        """DOC-1, INIT-2: memU wording under memory.backend: loom warns with the fix."""
        instance.configure("memory:\n  backend: loom\n")
        wording = by_id(instance.doctor_json("--offline"))["workspace.wording"]
        assert wording["status"] == "WARN"
        assert wording["message"] == "files worded for memu, but memory.backend is loom"
        local = instance.config_dir / "config.local.yaml"
        assert wording["advice"] == (
            "run python -m provisioner init --memory-backend loom "
            f"--workspace {instance.workspace} --config-dir {instance.config_dir}; or, to "
            "switch the instance to memu as its files are worded, add to "
            f"{local}: memory: {{backend: memu}}"
        )

    def test_a_missing_workspace_is_an_err_with_the_init_command(self, instance: Instance) -> None:
        shutil.rmtree(instance.workspace)
        result = instance.doctor("--offline")
        assert result.returncode == 1
        assert f"no workspace folder at {instance.workspace}" in result.stdout

    def test_a_hostile_manifest_never_leads_doctor_outside_the_workspace_or_into_a_fifo(
        self, instance: Instance, tmp_path: Path
    ) -> None:
        """INIT-7: the agent may write the manifest; doctor follows no path out of it."""
        outside = tmp_path / "outside.txt"
        outside.write_text("secret\n", encoding="utf-8")
        (instance.workspace / "link").symlink_to(tmp_path)
        os.mkfifo(instance.workspace / "pipe")
        manifest_path = instance.workspace / ".nerve/provisioned.json"
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        import hashlib

        digest = "sha256:" + hashlib.sha256(b"secret\n").hexdigest()
        manifest["files"].update(
            {"../outside.txt": digest, "link/outside.txt": digest, "pipe": digest}
        )
        manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
        files = by_id(instance.doctor_json("--offline"))["workspace.files"]
        assert "3 edited (../outside.txt, link/outside.txt, pipe)" in files["message"]

    def test_a_manifest_folder_that_is_a_link_out_of_the_workspace_is_not_followed(
        self, instance: Instance, tmp_path: Path
    ) -> None:
        """INIT-7: `.nerve` replaced by a link elsewhere counts as no manifest, not an error."""
        elsewhere = tmp_path / "elsewhere"
        shutil.move(instance.workspace / ".nerve", elsewhere)
        (instance.workspace / ".nerve").symlink_to(elsewhere)
        result = instance.doctor("--offline")
        assert result.returncode == 0, result.stderr
        manifest = by_id(instance.doctor_json("--offline"))["workspace.manifest"]
        assert manifest["status"] == "WARN"

    def test_a_workspace_without_a_manifest_warns(self, instance: Instance) -> None:
        (instance.workspace / ".nerve/provisioned.json").unlink()
        manifest = by_id(instance.doctor_json("--offline"))["workspace.manifest"]
        assert manifest["status"] == "WARN"
        assert "was not provisioned by nerve init" in manifest["message"]


def write_lines(path: Path, count: int, *, ending: str = "\n", padding: str = "") -> None:
    body = ending.join(f"- fact number {number}" for number in range(1, count + 1))
    path.write_bytes((padding + body + ending + padding).encode("utf-8"))


class TestMemoryMd:
    """NERVE-6: Nerve shows a session only the first 300 lines of MEMORY.md; doctor says so."""

    def test_the_limit_is_the_one_nerve_has(self) -> None:
        assert MEMORY_MD_LINES_SHOWN == 300

    def test_a_memory_md_of_300_lines_is_ok(self, instance: Instance) -> None:
        write_lines(instance.workspace / "MEMORY.md", 300)
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "OK"
        assert check["message"] == "MEMORY.md has 300 lines, all within the 300 Nerve shows"

    def test_one_line_more_warns_with_how_many_are_never_seen(self, instance: Instance) -> None:
        write_lines(instance.workspace / "MEMORY.md", 301)
        result = instance.doctor("--offline")
        assert result.returncode == 0, result.stdout  # a warning, not an error
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "WARN"
        assert check["message"].startswith("MEMORY.md has 301 lines: the last 1 are never seen")
        assert "at most 300 lines" in check["advice"]
        assert check["source"] == str(instance.workspace / "MEMORY.md")

    @pytest.mark.parametrize("ending", ["\r\n", "\r"])
    def test_lines_are_counted_with_any_line_ending_as_nerve_reads_them(
        self, instance: Instance, ending: str
    ) -> None:
        write_lines(instance.workspace / "MEMORY.md", 301, ending=ending)
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "WARN" and "has 301 lines" in check["message"]

    def test_blank_lines_at_either_end_do_not_count(self, instance: Instance) -> None:
        """Nerve strips the file before it counts, so padding never pushes a line out."""
        write_lines(instance.workspace / "MEMORY.md", 300, padding="\n\n \n\t\n")
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "OK" and "has 300 lines" in check["message"]

    def test_the_shipped_memory_md_is_within_the_limit(self, instance: Instance) -> None:
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "OK"

    def test_without_a_memory_md_there_is_no_such_line(self, instance: Instance) -> None:
        (instance.workspace / "MEMORY.md").unlink()
        assert "workspace.memory_md" not in by_id(instance.doctor_json("--offline"))

    def test_a_workspace_nerve_set_up_itself_is_checked_too(self, instance: Instance) -> None:
        """A workspace without this package's manifest is exactly where MEMORY.md has grown."""
        (instance.workspace / ".nerve/provisioned.json").unlink()
        write_lines(instance.workspace / "MEMORY.md", 450)
        checks = by_id(instance.doctor_json("--offline"))
        assert checks["workspace.manifest"]["status"] == "WARN"
        assert checks["workspace.memory_md"]["status"] == "WARN"
        assert "the last 150 are never seen" in checks["workspace.memory_md"]["message"]

    def test_a_memory_md_that_is_a_link_is_never_followed(
        self, instance: Instance, tmp_path: Path
    ) -> None:
        """INIT-7: the agent may make it a link anywhere; doctor opens nothing through it."""
        outside = tmp_path / "outside.md"
        write_lines(outside, 500)
        (instance.workspace / "MEMORY.md").unlink()
        (instance.workspace / "MEMORY.md").symlink_to(outside)
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "WARN"
        assert check["message"] == (
            "MEMORY.md is a link or not a plain file; doctor does not open it"
        )

    def test_a_memory_md_that_is_a_fifo_does_not_block_doctor(self, instance: Instance) -> None:
        (instance.workspace / "MEMORY.md").unlink()
        os.mkfifo(instance.workspace / "MEMORY.md")
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "WARN" and "not a plain file" in check["message"]

    def test_a_memory_md_that_is_not_utf8_warns_that_nerve_shows_none_of_it(
        self, instance: Instance
    ) -> None:
        (instance.workspace / "MEMORY.md").write_bytes(b"caf\xe9 au lait\n")
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "WARN"
        assert "not UTF-8" in check["message"] and "shows none of it" in check["message"]

    def test_a_huge_memory_md_warns_without_being_read_whole(self, instance: Instance) -> None:
        path = instance.workspace / "MEMORY.md"
        with path.open("wb") as handle:
            handle.truncate(MEMORY_MD_MAX_BYTES + 1)
        check = by_id(instance.doctor_json("--offline"))["workspace.memory_md"]
        assert check["status"] == "WARN"
        assert f"is over {MEMORY_MD_MAX_BYTES // (1024 * 1024)} MiB" in check["message"]


class TestMemu:
    def test_memu_says_where_memory_is_kept_and_never_prints_the_key(
        self, instance: Instance
    ) -> None:
        """DOC-1, INIT-3: the embeddings key's presence, never its value."""
        secret = "sk-canary-0123456789"
        instance.configure(f"openai_api_key: {secret}\n", name="config.local.yaml")
        text = instance.doctor("--offline").stdout
        report = instance.doctor_json("--offline")
        assert secret not in text and secret not in json.dumps(report)
        checks = by_id(report)
        assert checks["memu.store"]["message"].startswith("memory is kept in memU")
        key = checks["memu.embeddings_key"]
        assert "is set in" in key["message"]
        assert key["source"] == str(instance.config_dir / "config.local.yaml")

    def test_an_absent_embeddings_key_is_fine(self, instance: Instance) -> None:
        key = by_id(instance.doctor_json("--offline"))["memu.embeddings_key"]
        assert key["status"] == "OK"
        assert "is not set; memU works without it" in key["message"]


class TestLoomOffline:
    def test_loom_and_the_gateway_are_named(self, instance: Instance) -> None:
        """DOC-1: names Loom and the gateway."""
        instance.configure(LOOM_CONFIG)
        gateway = by_id(instance.doctor_json("--offline"))["loom.gateway"]
        assert gateway["status"] == "OK"
        assert gateway["message"] == (
            "memory is kept in Loom, reached through the MCP gateway at http://127.0.0.1:9"
        )

    def test_a_missing_gateway_url_is_an_err_naming_where_to_set_it(
        self, instance: Instance
    ) -> None:
        instance.configure("memory:\n  backend: loom\n")
        gateway = by_id(instance.doctor_json("--offline"))["loom.gateway"]
        assert gateway["status"] == "ERR"
        assert "mcp_gateway_url is not set" in gateway["message"]
        assert str(instance.config_dir / "config.local.yaml") in gateway["advice"]

    @pytest.mark.parametrize(
        "url", ["javascript:alert(1)", "/relative/path", "loom.example.com", "ftp://x.example"]
    )
    def test_a_dashboard_url_that_is_not_absolute_http_warns_and_is_no_link(
        self, instance: Instance, url: str
    ) -> None:
        """CONF-5: only an absolute http(s) URL becomes a link."""
        instance.configure(LOOM_CONFIG.replace("ada", f"ada\n    dashboard_url: '{url}'"))
        checks = by_id(instance.doctor_json("--offline"))
        dashboard = checks["loom.dashboard"]
        assert dashboard["status"] == "WARN"
        assert "no link is shown" in dashboard["message"]
        warnings = [c for c in checks.values() if c["id"].startswith("config.warning")]
        assert not [c for c in warnings if "dashboard_url" in c["message"]], "reported once"

    def test_an_https_dashboard_url_is_shown(self, instance: Instance) -> None:
        instance.configure(
            LOOM_CONFIG.replace("ada", "ada\n    dashboard_url: https://loom.example/ns/ada")
        )
        dashboard = by_id(instance.doctor_json("--offline"))["loom.dashboard"]
        assert dashboard["status"] == "OK"
        assert dashboard["message"].endswith("at https://loom.example/ns/ada")


class TestQueuedExtraction:
    """docs/config.md asks to keep ``defer_extraction`` off; doctor says so, with the reason."""

    KEY = "config.memory.loom.defer_extraction"

    def test_defer_extraction_true_warns_with_the_reason_and_the_file_to_change(
        self, instance: Instance
    ) -> None:
        """DOC-1, SWEEP-4: a queued batch that fails inside Loom is lost to the sweep."""
        instance.configure(LOOM_CONFIG.replace("ada", "ada\n    defer_extraction: true"))
        result = instance.doctor("--offline")
        assert result.returncode == 0, "a warning, not an error"
        assert f"[WARN] {self.KEY}: memory.loom.defer_extraction = true, from" in result.stdout
        check = by_id(instance.doctor_json("--offline"))[self.KEY]
        assert check["message"].endswith(
            "a queued window's watermark moves when Loom accepts the batch, not when it is "
            "written, so a failed background extraction loses it"
        )
        config_file = instance.config_dir / "config.yaml"
        assert check["advice"].startswith(
            f"set memory.loom.defer_extraction: false in {config_file}, or remove it"
        )
        assert check["source"] == str(config_file)

    def test_the_file_named_is_the_layer_whose_value_won(self, instance: Instance) -> None:
        instance.configure(LOOM_CONFIG)
        instance.configure(
            "memory:\n  loom:\n    defer_extraction: ${QUEUE:-false}\n", name="config.local.yaml"
        )
        check = by_id(instance.doctor_json("--offline", env={"QUEUE": "true"}))[self.KEY]
        assert check["status"] == "WARN"
        local = instance.config_dir / "config.local.yaml"
        assert check["source"] == f"${{QUEUE}} in {local}"
        assert f"false in {local}," in check["advice"]

    @pytest.mark.parametrize("setting", ["", "\n    defer_extraction: false"])
    def test_waiting_extraction_is_ok(self, instance: Instance, setting: str) -> None:
        instance.configure(LOOM_CONFIG.replace("ada", "ada" + setting))
        assert by_id(instance.doctor_json("--offline"))[self.KEY]["status"] == "OK"

    def test_under_memu_the_loom_setting_is_not_checked(self, instance: Instance) -> None:
        instance.configure("memory:\n  backend: memu\n  loom:\n    defer_extraction: true\n")
        report = instance.doctor_json("--offline")
        assert self.KEY not in by_id(report)
        assert report["summary"]["warnings"] == 0


class TestTroubleshootingPage:
    def test_every_check_id_doctor_can_print_has_a_section(self) -> None:
        """DOC-2: docs/troubleshooting.md is keyed by what doctor prints."""
        import ast

        root = Path(__file__).resolve().parents[2]
        ids: set[str] = set()
        for module in (root / "provisioner" / "doctor").glob("*.py"):
            for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                    "Check",
                    "_within_deadline",
                ):
                    first = node.args[0] if node.args else None
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        ids.add(first.value)
                    elif isinstance(first, ast.JoinedStr):
                        prefix = first.values[0]
                        assert isinstance(prefix, ast.Constant)
                        ids.add(f"{prefix.value}")  # a prefix such as "config.warning."
        from provisioner.doctor.config import LOOM_ORIGIN_KEYS, ORIGIN_KEYS

        ids |= {f"config.{key}`" for key in ORIGIN_KEYS} | {"config.memory.loom.*`"}
        assert len(LOOM_ORIGIN_KEYS) == 5 and len(ids) >= 12, ids
        page = (root / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
        headings = [line for line in page.splitlines() if line.startswith("### ")]
        missing = sorted(i for i in ids if not any(f"`{i}" in h for h in headings))
        assert not missing, f"no section for: {missing}"
