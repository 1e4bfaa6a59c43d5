"""How a golden difference is shown to a template author (GOLD-2).

The unified diff makes invisible bytes visible: a carriage return is shown as ``␍`` where it
stands (lines end at LF only), and a last line without a newline gets GNU diff's
``\\ No newline at end of file``.
For YAML files a structural summary follows, with cron jobs matched by ``id`` so that a moved
or re-indented job reads as what it is.
"""

from __future__ import annotations

import difflib
from typing import Any

CR_MARK = "␍"
NO_NEWLINE = "\\ No newline at end of file"
DIFF_CONTEXT_LINES = 3


def unified_diff(
    golden: bytes, rendered: bytes, path: str, *, labels: tuple[str, str] = ("golden", "rendered")
) -> str:
    """A unified diff from the golden to the render, ending in a newline.

    ``labels`` name the two sides in the ``---``/``+++`` headers (``nerve diff`` shows the
    workspace against what init would write).
    """
    before = _visible_lines(golden)
    after = _visible_lines(rendered)
    lines = difflib.unified_diff(
        before,
        after,
        fromfile=f"{labels[0]}/{path}",
        tofile=f"{labels[1]}/{path}",
        n=DIFF_CONTEXT_LINES,
        lineterm="",
    )
    return "".join(f"{line}\n" for line in lines)


def _visible_lines(content: bytes) -> list[str]:
    """Lines without their terminator, every CR shown, and the missing final newline marked.

    Lines end at LF only, as they do for diff and git: ``str.splitlines`` would also break at
    a lone CR, form feed or U+2028, and then mark each such piece as a last line without a
    newline.
    """
    text = content.decode("utf-8", errors="backslashreplace").replace("\r", CR_MARK)
    lines = text.split("\n")
    unterminated = lines.pop()  # "" when the content ends with a newline
    if unterminated:
        lines.append(unterminated + "\n" + NO_NEWLINE)
    return lines


def structural_summary(path: str, golden: bytes, rendered: bytes) -> list[str]:
    """For a YAML file, one line per structural change (jobs matched by ``id``); else []."""
    if not path.endswith((".yaml", ".yml")):
        return []
    import yaml
    from deepdiff import DeepDiff  # deferred: only a YAML difference needs it

    try:
        before, after = yaml.safe_load(golden), yaml.safe_load(rendered)
    except yaml.YAMLError as error:
        return [f"not valid YAML: {str(error).splitlines()[0]}"]
    keyed = _jobs_by_id(before), _jobs_by_id(after)
    if keyed[0] is not None and keyed[1] is not None:
        before, after = keyed
    difference = DeepDiff(before, after, view="tree")
    lines: list[str] = []
    labels = {
        "dictionary_item_added": "added",
        "dictionary_item_removed": "removed",
        "values_changed": "changed",
        "type_changes": "changed type",
        "iterable_item_added": "item added",
        "iterable_item_removed": "item removed",
    }
    for kind, label in labels.items():
        for change in difference.get(kind, []):
            lines.append(f"{_dotted(change.path(output_format='list'))}: {label}")
    return sorted(lines)


def _jobs_by_id(document: Any) -> Any:
    """The document with its ``jobs`` list keyed by job id, or None when it cannot be.

    Keyed by id, jobs compare by identity, not by position. Both sides must be keyable (every
    job has an id and no id repeats): keyed by id, a repeated job would collapse into one and
    its addition would not show in the summary, so such a file compares as lists.
    """
    if isinstance(document, dict) and isinstance(document.get("jobs"), list):
        jobs = document["jobs"]
        if all(isinstance(job, dict) and "id" in job for job in jobs):
            by_id = {str(job["id"]): job for job in jobs}
            if len(by_id) == len(jobs):
                return {**document, "jobs": by_id}
    return None


def _dotted(parts: list[Any]) -> str:
    return ".".join(str(part) for part in parts) or "(document)"
