"""What ``nerve init`` and ``nerve golden check`` print, as text and as JSON (INIT-6, GOLD-2).

The golden report is read by template authors on a terminal and by CI in a log: on a terminal
it is coloured (``NO_COLOR`` turns that off, and a pipe or file never gets colour), and in
JSON it carries every field it ever had plus what the text shows (OPS-1).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.golden.advice import Acceptance
    from provisioner.golden.check import CheckReport, Difference
    from provisioner.golden.places import WordingPlace
    from provisioner.golden.source import TemplateSource
    from provisioner.workspace.init import InitResult

from provisioner.backends import get_backend
from provisioner.base.command import command
from provisioner.base.counts import counted

LOCAL_CONFIG = "config.local.yaml"
# CONF-3: a locked instance's settings.yaml takes these from the environment.
LOCKED_VARIABLES = ("NERVE_MEMORY_BACKEND", "NERVE_MCP_BASE_URL", "LOOM_DASHBOARD_URL")


def kept_diff_command(result: InitResult, path: str) -> str:
    """The command that shows how a kept file differs from what init would write (INIT-5)."""
    return f"{command('diff')} --workspace {shlex.quote(str(result.workspace))} {shlex.quote(path)}"


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
    lines += [
        f"  merged     {path} (edited; the template's change merged in)"
        for path in placement.merged
    ]
    lines += conflict_lines(placement.conflicts)
    for path in placement.kept:
        lines.append(f"  kept       {path} (edited; see: {kept_diff_command(result, path)})")
    if placement.unchanged:
        lines.append(f"  unchanged  {counted(len(placement.unchanged), 'file')}")
    lines += [
        f"  left       {path} (no longer part of this render; not removed)"
        for path in placement.no_longer_rendered
    ]
    lines.append(_memory_line(result.memory_step))
    lines.append(_backend_note(result, config_dir))
    return "\n".join(lines) + "\n"


def conflict_lines(conflicts: Mapping[str, str]) -> list[str]:
    """FLEET-3: each conflicting file, and its diff3-style preview indented below it; a file
    too large to read whole (REL-10) is named as such, whatever the template did."""
    from provisioner.workspace.placement import PAST_READ_CAP  # deferred, as InitResult is

    lines: list[str] = []
    for path, preview in conflicts.items():
        why = (
            "too large to read whole"
            if preview == PAST_READ_CAP
            else "edited where the template changed too"
        )
        lines.append(f"  conflict   {path} ({why}; left as it is)")
        lines += [f"             {line}" for line in preview.splitlines()]
    return lines


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
        "merged": placement.merged,
        "conflicts": [
            {"path": path, "preview": preview} for path, preview in placement.conflicts.items()
        ],
        "unchanged": placement.unchanged,
        "no_longer_rendered": placement.no_longer_rendered,
        "memory": result.memory_step,
        "warnings": list(result.warnings),
        "locked": result.locked,
        "note": _backend_note(result, config_dir),
    }


def wants_colour(stream: IO[str], env: Mapping[str, str]) -> bool:
    """Colour only on a terminal, and never with ``NO_COLOR`` set (no-color.org) or TERM=dumb."""
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


PLACES_SHOWN = 3  # template lines named under a WORDING line; the rest are counted

# SGR codes of the golden report's colours.
_STYLES = {
    "changed": "1;33",
    "mode": "1;33",
    "unrecorded": "1;33",
    "missing": "1;32",
    "orphan": "1;31",
    "wording": "1;35",
    "added": "32",
    "removed": "31",
    "hunk": "36",
    "header": "1",
    "failed": "1;31",
    "passed": "1;32",
    "command": "1",
}


class _Painter:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, style: str, text: str) -> str:
        if not self.colour or not text or not style:
            return text
        return f"\x1b[{_STYLES[style]}m{text}\x1b[0m"

    def diff(self, detail: str) -> list[str]:
        lines = detail.rstrip("\n").split("\n")
        if not self.colour:
            return lines
        return [self(_diff_style(line, index), line) for index, line in enumerate(lines)]


def _diff_style(line: str, index: int) -> str:
    if index < 2 and line.startswith(("--- ", "+++ ")):
        return "header"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "added"
    if line.startswith("-"):
        return "removed"
    return ""  # context lines and the structural summary stay plain


def _difference_lines(difference: Difference, paint: _Painter) -> list[str]:
    headline = difference.headline()
    kind, rest = headline[: len(difference.kind)], headline[len(difference.kind) :]
    lines = [paint(difference.kind, kind) + rest]
    if difference.summary:
        lines.append(f"  {difference.summary}")
    elif difference.detail:
        lines += paint.diff(difference.detail)
    return lines


def golden_report_text(
    report: CheckReport,
    *,
    source: TemplateSource | None = None,
    advice: Acceptance | None = None,
    colour: bool = False,
) -> str:
    """The check as an author reads it: each difference, each WORDING problem and where it
    was written, one summary line naming the rendered folder, then the exact accept command
    or why there is none.
    """
    paint = _Painter(colour)
    lines: list[str] = []
    for difference in report.differences:
        lines += _difference_lines(difference, paint)
    for problem in report.wording:
        lines.append(f"{paint('wording', 'WORDING')}  {problem}")
        place = report.places.get(problem)
        if place is not None:
            lines.append(f"         {_place_text(place)}")
    origin = f" from {source.describe()}" if source else ""
    if report.ok:
        lines.append(
            paint(
                "passed",
                f"golden check: {counted(report.files_checked, 'rendered file')} match golden/",
            )
            + origin
        )
        return "\n".join(lines) + "\n"
    problems = counted(report.problem_count, "problem")
    lines.append(
        paint(
            "failed",
            f"golden check: {problems} in {counted(report.files_checked, 'rendered file')}",
        )
        + origin
    )
    if advice is not None:
        if advice.command:
            lines.append(f"accept with: {paint('command', advice.command)}")
        lines += [f"not accepted: {reason}" for reason in advice.refused]
    return "\n".join(lines) + "\n"


def _place_text(place: WordingPlace) -> str:
    rendered = f"rendered line {place.rendered_line}" if place.rendered_line else ""
    if not place.sources:
        return f"{rendered} (no template line holds this text)".strip()
    shown = ", ".join(str(source) for source in place.sources[:PLACES_SHOWN])
    more = len(place.sources) - PLACES_SHOWN
    if more > 0:
        shown += f" and {more} more"
    return f"{shown} ({rendered})" if rendered else shown


def golden_report_json(
    report: CheckReport,
    *,
    source: TemplateSource | None = None,
    advice: Acceptance | None = None,
) -> dict[str, Any]:
    """The check for machines: every field of the first version, and what the text adds."""
    wording = []
    for problem in report.wording:
        place = report.places.get(problem)
        wording.append(
            {
                "text": problem.text_name,
                "backend": problem.backend,
                "tool": problem.tool,
                "reason": problem.reason,
                "rendered_line": place.rendered_line if place else None,
                "template_lines": [
                    {"path": source_place.path, "line": source_place.line}
                    for source_place in (place.sources if place else ())
                ],
            }
        )
    return {
        "ok": report.ok,
        "files_checked": report.files_checked,
        "differences": [
            {"kind": d.kind, "path": d.path, "detail": d.detail, "summary": d.summary}
            for d in report.differences
        ],
        "wording": wording,
        "problems": report.problem_count,
        "rendered_from": str(source.root) if source else None,
        "rendered_from_origin": source.origin if source else None,
        "accept_command": advice.command if advice else None,
        "not_accepted": list(advice.refused) if advice else [],
    }
