"""What ``nerve init`` and ``nerve golden check`` print, as text and as JSON (INIT-6, GOLD-2)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.golden.check import CheckReport
    from provisioner.workspace.init import InitResult

from provisioner.templating.backends import get_backend

LOCAL_CONFIG = "config.local.yaml"
# CONF-3: a locked instance's settings.yaml takes these from the environment.
LOCKED_VARIABLES = ("NERVE_MEMORY_BACKEND", "NERVE_MCP_BASE_URL", "LOOM_DASHBOARD_URL")


def kept_diff_command(result: InitResult, path: str) -> str:
    """The command that shows how a kept file differs from what init would write (INIT-5)."""
    return f"nerve diff --workspace {shlex.quote(str(result.workspace))} {shlex.quote(path)}"


def _backend_note(result: InitResult, config_dir: Path) -> str:
    """INIT-2: init words the files; the platform sets ``memory.backend``.

    Under lockdown no machine-local file is read (CONF-3), so the note names the environment
    variables the locked settings read instead.
    """
    worded = (
        f"Init worded the files for {result.answers.memory_backend} "
        f"(from {result.backend_source}); it does not set memory.backend, "
    )
    if result.locked:
        names = ", ".join(LOCKED_VARIABLES)
        return worded + f"which this locked instance reads from the environment ({names})."
    return worded + f"which the platform sets in {config_dir / LOCAL_CONFIG}."


def _memory_line(step: dict[str, Any]) -> str:
    """INIT-3: the line the wording's backend gives for its memory step."""
    return get_backend(step["backend"]).summary_line(step)


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
        "locked": result.locked,
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
