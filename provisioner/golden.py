"""Frozen renders (GOLD-1…GOLD-6): compare what the templates render now with ``golden/``.

``golden/<backend>/<profile>/…`` holds the complete render of each workspace, and
``golden/<backend>/texts/<name>[@<case>].md`` each runtime text. ``check`` renders everything
into a scratch folder and reports every difference in one run; it never writes to ``golden/``.
``update`` rewrites the goldens of the backends it is asked for and removes their orphans.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from provisioner import assets, jobs
from provisioner.backends import BACKEND_NAMES, PROFILES
from provisioner.errors import UserError
from provisioner.files import file_mode, write_atomically
from provisioner.golden_diff import structural_summary, unified_diff
from provisioner.render import Answers, RenderedFile, read_tree, render_workspace
from provisioner.wording import (
    WordingProblem,
    lint_runtime_texts,
    lint_text,
    nameable_by_backend,
)

TEXTS_DIR = "texts"  # GOLD-1: golden/<backend>/texts/<name>[@<case>].md


class GoldenRefused(UserError, RuntimeError):
    """An update that must not run (under CI, or memU goldens not asked for by name)."""


@dataclass(frozen=True)
class Difference:
    """One way the render and the goldens disagree."""

    kind: str  # "changed", "mode", "missing", "orphan" (golden only), "unrecorded" (TXT-7)
    path: str  # relative to the golden folder
    detail: str = ""

    def headline(self) -> str:
        explanations = {
            "changed": "bytes differ",
            "mode": "exec bit differs",
            "missing": "rendered, but there is no golden",
            "orphan": "golden, but no longer rendered",
            "unrecorded": "memU job prompt not in the shipped-prompt registry (TXT-7)",
        }
        return f"{self.kind.upper():8} {self.path} ({explanations[self.kind]})"


@dataclass
class CheckReport:
    """Everything ``check`` found: differences, wording problems, and how many files it saw."""

    differences: list[Difference] = field(default_factory=list)
    wording: list[WordingProblem] = field(default_factory=list)
    files_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.differences and not self.wording


def default_golden_dir() -> Path:
    """``./golden`` when the current folder has one, else the source checkout's."""
    here = Path.cwd() / "golden"
    if here.is_dir():
        return here
    return assets.checkout_root() / "golden"


def render_expected(
    scratch: Path, backends: Iterable[str] = BACKEND_NAMES
) -> dict[str, RenderedFile]:
    """Render the workspaces and runtime texts of ``backends`` below ``scratch``.

    Keyed by golden path (``<backend>/<profile>/…``, ``<backend>/texts/…``).
    """
    from provisioner import texts

    chosen = tuple(backends)
    expected: dict[str, RenderedFile] = {}
    for backend in chosen:
        for profile in PROFILES:
            answers = Answers(profile=profile, memory_backend=backend)
            for rendered in render_workspace(answers, scratch / backend / profile):
                expected[f"{backend}/{profile}/{rendered.path}"] = rendered
    for text in texts.all_texts():
        if text.backend in chosen:
            body = text.body.encode()
            rendered = RenderedFile(text.file_name, body, executable=False)
            expected[f"{text.backend}/{TEXTS_DIR}/{text.file_name}"] = rendered
    return expected


def check(golden_dir: Path) -> CheckReport:
    """Compare a fresh render with ``golden_dir``; writes nothing there (GOLD-2, GOLD-5)."""
    with tempfile.TemporaryDirectory(prefix="nerve-golden-") as scratch:
        expected = render_expected(Path(scratch))
    report = CheckReport(files_checked=len(expected))
    report.differences = compare(expected, read_goldens(golden_dir, BACKEND_NAMES), golden_dir)
    report.wording = lint_renders(expected) + lint_runtime_texts(BACKEND_NAMES)
    report.differences += [
        Difference("unrecorded", f"templates/{jobs.SHIPPED_PROMPTS_NAME}: {job_id}")
        for job_id in jobs.unrecorded_memu_prompts()
    ]
    return report


def read_goldens(golden_dir: Path, backends: Iterable[str]) -> dict[str, RenderedFile]:
    """The golden files of ``backends``, keyed by their path below ``golden_dir``."""
    goldens: dict[str, RenderedFile] = {}
    for backend in backends:
        root = golden_dir / backend
        if root.is_dir():
            for golden in read_tree(root):
                goldens[f"{backend}/{golden.path}"] = golden
    return goldens


def compare(
    expected: Mapping[str, RenderedFile], goldens: Mapping[str, RenderedFile], golden_dir: Path
) -> list[Difference]:
    """Every difference between a render and the goldens, sorted by path."""
    differences: list[Difference] = []
    for path in sorted(set(expected) | set(goldens)):
        rendered, golden = expected.get(path), goldens.get(path)
        if golden is None:
            differences.append(Difference("missing", path))
        elif rendered is None:
            differences.append(Difference("orphan", path))
        else:
            if rendered.content != golden.content:
                detail = unified_diff(golden.content, rendered.content, path)
                summary = structural_summary(path, golden.content, rendered.content)
                if summary:
                    detail += "structure:\n" + "".join(f"  {line}\n" for line in summary)
                differences.append(Difference("changed", path, detail))
            if rendered.executable != golden.executable:
                states = {True: "executable", False: "not executable"}
                detail = f"golden {states[golden.executable]}, render {states[rendered.executable]}"
                differences.append(Difference("mode", path, detail + "\n"))
    return differences


def lint_renders(expected: Mapping[str, RenderedFile]) -> list[WordingProblem]:
    """GOLD-5 over every rendered text; the backend is the first part of the golden path."""
    nameable = nameable_by_backend()
    problems: list[WordingProblem] = []
    for path, rendered in sorted(expected.items()):
        backend = path.split("/", 1)[0]
        text = rendered.content.decode("utf-8", errors="replace")
        problems.extend(lint_text(path, text, backend, nameable))
    return problems


def update(golden_dir: Path, backends: Iterable[str], *, env: Mapping[str, str]) -> list[str]:
    """Rewrite the goldens of ``backends`` and remove their orphans (GOLD-3).

    Refused (``GoldenRefused``) when ``CI`` is set (CI checks goldens, it never makes them)
    and when the render breaks the wording rules (GOLD-5): a golden is never a violation.
    Returns the golden paths that were written or removed. Files are replaced one by one
    through a temporary name, so an interrupted update leaves each file whole.
    """
    if env.get("CI"):
        raise GoldenRefused("golden update is refused while CI is set; run it locally")
    chosen = tuple(backends)
    with tempfile.TemporaryDirectory(prefix="nerve-golden-") as scratch:
        expected = render_expected(Path(scratch), chosen)
    problems = lint_renders(expected) + lint_runtime_texts(chosen)
    if problems:
        raise GoldenRefused(
            f"golden update refused: {len(problems)} wording problem(s), the first: "
            f"{problems[0]}; see nerve golden check"
        )
    goldens = read_goldens(golden_dir, chosen)
    touched: list[str] = []
    if "memu" in chosen and jobs.record_current_memu_prompts():
        touched.append(f"templates/{jobs.SHIPPED_PROMPTS_NAME}")
    for difference in compare(expected, goldens, golden_dir):
        target = golden_dir / difference.path
        if difference.kind == "orphan":
            target.unlink()
            _remove_empty_parents(target.parent, golden_dir)
        else:
            rendered = expected[difference.path]
            write_atomically(target, rendered.content, file_mode(rendered.executable))
        touched.append(difference.path)
    return sorted(set(touched))


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
