"""What ``nerve init`` and ``nerve golden check`` print, as text and as JSON (INIT-6, GOLD-2)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.golden import CheckReport
    from provisioner.init import InitResult

LOCAL_CONFIG = "config.local.yaml"


def kept_diff_command(result: InitResult, path: str) -> str:
    """The command that shows how a kept file differs from what init would write (INIT-5)."""
    return f"nerve diff --workspace {shlex.quote(str(result.workspace))} {shlex.quote(path)}"


def _backend_note(result: InitResult, config_dir: Path) -> str:
    """INIT-2: init words the files; the platform sets ``memory.backend``."""
    return (
        f"Init worded the files for {result.answers.memory_backend} "
        f"(from {result.backend_source}); it does not set memory.backend, which the platform "
        f"sets in {config_dir / LOCAL_CONFIG}."
    )


def _memory_line(step: dict[str, Any]) -> str:
    """INIT-3: under Loom, whether the gateway is configured; under memU, the key offer."""
    if step["backend"] == "loom":
        if step["mcp_gateway_url"]:
            return f"Memory: Loom through the MCP gateway at {step['mcp_gateway_url']}."
        return "Memory: Loom through the MCP gateway; mcp_gateway_url is not set yet."
    if "embeddings_key_stored_in" in step:
        return f"Memory: memU; embeddings key stored in {step['embeddings_key_stored_in']}."
    if step["asked"]:
        return "Memory: memU; no embeddings key given (optional)."
    return "Memory: memU."


def init_summary_text(result: InitResult, config_dir: Path) -> str:
    placement = result.placement
    lines = [
        f"Workspace {result.workspace} ({result.answers.profile}, "
        f"worded for {result.answers.memory_backend})"
    ]
    lines += [f"  created    {path}" for path in placement.created]
    lines += [f"  re-worded  {path}" for path in placement.reworded]
    for path in placement.kept:
        lines.append(f"  kept       {path} (edited; see: {kept_diff_command(result, path)})")
    if placement.unchanged:
        lines.append(f"  unchanged  {len(placement.unchanged)} files")
    lines += [
        f"  left       {path} (no longer part of this render; not removed)"
        for path in placement.no_longer_rendered
    ]
    lines.append(_memory_line(result.memory_step))
    lines.append(_backend_note(result, config_dir))
    return "\n".join(lines) + "\n"


def init_summary_json(result: InitResult, config_dir: Path) -> dict[str, Any]:
    placement = result.placement
    return {
        "workspace": str(result.workspace),
        "answers": result.answers.as_data(),
        "wording": result.answers.memory_backend,
        "wording_source": result.backend_source,
        "created": placement.created,
        "reworded": placement.reworded,
        "kept": [
            {"path": path, "diff_command": kept_diff_command(result, path)}
            for path in placement.kept
        ],
        "unchanged": placement.unchanged,
        "no_longer_rendered": placement.no_longer_rendered,
        "memory": result.memory_step,
        "warnings": list(result.warnings),
        "note": _backend_note(result, config_dir),
    }


def golden_report_text(report: CheckReport) -> str:
    lines: list[str] = []
    for difference in report.differences:
        lines.append(difference.headline())
        if difference.detail:
            lines.append(difference.detail.rstrip("\n"))
    for problem in report.wording:
        lines.append(f"WORDING  {problem}")
    count = len(report.differences) + len(report.wording)
    if count:
        lines.append(
            f"golden check: {count} problem(s) in {report.files_checked} rendered files. "
            "If a wording change is intended: nerve golden update --backend <backend>"
        )
    else:
        lines.append(f"golden check: {report.files_checked} rendered files match golden/")
    return "\n".join(lines) + "\n"


def golden_report_json(report: CheckReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "files_checked": report.files_checked,
        "differences": [
            {"kind": d.kind, "path": d.path, "detail": d.detail} for d in report.differences
        ],
        "wording": [
            {"text": p.text_name, "backend": p.backend, "tool": p.tool, "reason": p.reason}
            for p in report.wording
        ],
    }
