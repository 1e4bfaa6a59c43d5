"""Calls on the dev gateway as its clients make them: a raw ``tools/call``, and ``nerve`` run
where the ``mcp`` SDK cannot be imported."""

from __future__ import annotations

import subprocess
import sys

import httpx

MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


def tools_call(
    http: httpx.Client, base_url: str, tool: str, arguments: dict, *, request_id: int = 1
) -> httpx.Response:
    """One raw ``tools/call`` POST, as the gateway client sends it."""
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return http.post(f"{base_url}/s/loom/mcp", json=body, headers=MCP_HEADERS)


def nerve_without_the_sdk(*args: str) -> subprocess.CompletedProcess[str]:
    """``nerve ARGS`` in a fresh interpreter where importing the ``mcp`` SDK fails, as on a
    machine without the ``dev`` extra."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('mcp', 'mcp_types'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from provisioner.cli.main import main\n"
        f"sys.exit(main({list(args)!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
