"""REL-14: a gateway URL's user info, query and fragment never reach any output, whatever the
value's type, wherever it is echoed: doctor (text and JSON), memory status, init, diff, the
runtime's own reader of Nerve-shaped settings. One masking function does it everywhere.
"""

from __future__ import annotations

import pytest

from provisioner.runtime.gateway.masking import MASK, masked
from provisioner.runtime.loom.settings import gateway_url_value
from tests.fleet.provisioning import run_main

SECRET = "s3cret"
VALUES = {
    "user-info": f'"https://agent:{SECRET}@gw.example/"',
    "query": f'"https://gw.example/mcp?token={SECRET}"',
    "fragment": f'"https://gw.example/#{SECRET}"',
    "bad-port": f'"http://agent:{SECRET}@gw.example:port/"',
    "list": f'["https://agent:{SECRET}@gw.example/"]',
    "mapping": f'{{url: "https://gw.example/?token={SECRET}"}}',
    "blank-inside": f'"https://gw.example/a b?token={SECRET}"',
}


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
@pytest.mark.parametrize(
    "command",
    [
        ["doctor"],
        ["doctor", "--json"],
        ["memory", "status"],
        ["memory", "status", "--json"],
        ["init", "--non-interactive"],
        ["init", "--check"],
    ],
    ids=lambda argv: "-".join(argv),
)
def test_no_command_prints_the_secret(tmp_path, value: str, command: list[str]) -> None:
    config_dir, workspace = tmp_path / "cfg", tmp_path / "ws"
    config_dir.mkdir()
    workspace.mkdir()
    (config_dir / "config.yaml").write_text(f"memory:\n  backend: loom\nmcp_gateway_url: {value}\n")
    ran = run_main([*command, "--config-dir", str(config_dir), "--workspace", str(workspace)])
    assert ran.status != 0
    assert SECRET not in ran.stdout + ran.stderr
    assert "mcp_gateway_url" in ran.stdout + ran.stderr  # the key is still named
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"https://agent:{SECRET}@gw.example/mcp", f"https://{MASK}@gw.example/mcp"),
        (f"https://gw.example/mcp?token={SECRET}", f"https://gw.example/mcp?{MASK}"),
        (f"https://gw.example/#{SECRET}", f"https://gw.example/#{MASK}"),
        (f"['http://a:{SECRET}@h:1/p?q#f']", f"['http://{MASK}@h:1/p?{MASK}#{MASK}']"),
        ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
        ("no URL here: a@b?c#d", "no URL here: a@b?c#d"),
    ],
)
def test_masked_keeps_the_gateway_and_drops_the_secret(text: str, shown: str) -> None:
    assert masked(text) == shown


def test_the_runtimes_reader_masks_a_query_it_refuses() -> None:
    with pytest.raises(ValueError, match="has a query or fragment") as refused:
        gateway_url_value(f"https://gw.example/?token={SECRET}", "mcp_gateway_url")
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("value", VALUES.values(), ids=VALUES.keys())
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_a_fleet_switch_names_an_instance_s_failure_without_the_secret(
    tmp_path, value: str, json_flag: list[str]
) -> None:
    """An instance whose configuration cannot be read fails alone in a switch, and its error
    line, in the text and in the JSON, keeps the gateway's secret out (REL-14)."""
    config_dir, workspace = tmp_path / "cfg", tmp_path / "ws"
    config_dir.mkdir()
    workspace.mkdir()
    (config_dir / "config.yaml").write_text(f"memory:\n  backend: loom\nmcp_gateway_url: {value}\n")
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text("- {workspace: ws, config_dir: cfg}\n")
    ran = run_main(["fleet", "switch", "--inventory", str(inventory), "--to", "loom", *json_flag])
    assert ran.status != 0
    assert "mcp_gateway_url" in ran.stdout + ran.stderr  # the instance's failure is named
    assert SECRET not in ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
