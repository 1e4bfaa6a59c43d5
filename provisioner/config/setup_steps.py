"""The memory step of ``nerve init`` per backend, and its summary line (INIT-3).

Each backend's registry entry names its step and line; ``nerve init`` calls the step of the
backend the files are worded for, and the summary shows the line. A step returns a plain
mapping, which ``nerve init --json`` prints as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EMBEDDINGS_KEY_LABEL = "OpenAI API key for memU embeddings (optional, Enter to skip)"


@dataclass(frozen=True)
class SetupContext:
    """What a memory step may use: the answers' backend, config values, and a way to ask.

    ``ask_secret`` is None when nothing may be asked (non-interactive or slim mode).
    ``locked`` is true under lockdown (CONF-3): then nothing is asked or written outside the
    workspace, since a locked instance reads no machine-local file.
    """

    backend: str
    config_dir: Path
    mcp_gateway_url: str | None
    locked: bool
    ask_secret: Callable[[str], str] | None


def memu_setup_step(context: SetupContext) -> dict[str, Any]:
    """memU: terminal mode offers the optional embeddings key and stores a given one.

    Under lockdown the key is neither asked for nor stored (a locked instance never reads
    ``config.local.yaml``); the step says the key comes from the environment instead.
    """
    step: dict[str, Any] = {"backend": context.backend, "asked": False}
    if context.locked:
        step["locked"] = True
        return step
    if context.ask_secret is not None:
        from provisioner.config.local_file import store_embeddings_key

        step["asked"] = True
        key = context.ask_secret(EMBEDDINGS_KEY_LABEL)
        if key:
            step["embeddings_key_stored_in"] = str(store_embeddings_key(context.config_dir, key))
    return step


def memu_summary_line(step: Mapping[str, Any]) -> str:
    if step.get("locked"):
        return "Memory: memU; locked, so no embeddings key was asked for or stored."
    if "embeddings_key_stored_in" in step:
        return f"Memory: memU; embeddings key stored in {step['embeddings_key_stored_in']}."
    if step["asked"]:
        return "Memory: memU; no embeddings key given (optional)."
    return "Memory: memU."


def loom_setup_step(context: SetupContext) -> dict[str, Any]:
    """Loom: nothing is asked (Loom needs no key); reports whether the gateway is set."""
    return {"backend": context.backend, "asked": False, "mcp_gateway_url": context.mcp_gateway_url}


def loom_summary_line(step: Mapping[str, Any]) -> str:
    if step.get("mcp_gateway_url"):
        return f"Memory: Loom through the MCP gateway at {step['mcp_gateway_url']}."
    return "Memory: Loom through the MCP gateway; mcp_gateway_url is not set yet."


def quiet_setup_step(context: SetupContext) -> dict[str, Any]:
    """A backend that needs nothing set up: nothing is asked, nothing is written."""
    return {"backend": context.backend, "asked": False}


def plain_summary_line(step: Mapping[str, Any]) -> str:
    return f"Memory: {step['backend']}."
