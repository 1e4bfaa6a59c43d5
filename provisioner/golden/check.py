"""Frozen renders (GOLD-1…GOLD-6): compare what the templates render now with ``golden/``.

``golden/<backend>/<profile>/…`` holds the complete render of each workspace, and
``golden/<backend>/texts/<name>[@<case>].md`` each runtime text. ``check`` renders everything
into a scratch folder and reports every difference in one run; it never writes to ``golden/``.
``update`` rewrites the goldens of the backends it is asked for and removes their orphans.
Both render the folder that is active when they run; the command line makes it the
checkout's own (``provisioner.golden.source``, OPS-1).

Both work on a source checkout only (``golden/`` beside ``templates/`` and a pyproject.toml
naming this package), or on a folder named with ``--golden-dir``: an installed package has no
goldens, and a folder that merely has a ``golden/`` is not ours to rewrite. An orphan is
removed only when its path is a golden's name (``<backend>/<profile>/…`` or
``<backend>/texts/<name>.md`` of a registered backend), never any other file.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.backends import BACKEND_NAMES, BACKENDS, PROFILES
from provisioner.base.command import command
from provisioner.base.errors import UserError
from provisioner.base.files import file_mode, write_atomically
from provisioner.golden.places import WordingPlace, wording_places
from provisioner.golden.shown import is_manifest, manifest_summary, new_file_detail
from provisioner.runtime.face import faults_named
from provisioner.templating import jobs
from provisioner.templating.folder import SHIPPED_PROMPTS_NAME, active_folder
from provisioner.templating.wording import (
    WordingProblem,
    lint_runtime_texts,
    lint_text,
    nameable_by_backend,
)
from provisioner.workspace.diff import structural_summary, unified_diff
from provisioner.workspace.render import (
    Answers,
    RenderedFile,
    read_tree,
    render_workspace,
    template_broken,
)

TEXTS_DIR = "texts"  # GOLD-1: golden/<backend>/texts/<name>[@<case>].md
PACKAGE_NAME = "nerve-provisioner"  # what a checkout's pyproject.toml names
CI_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})  # GOLD-3: CI=false or CI=0 is not CI
_TEXT_NAME = re.compile(r"[A-Za-z0-9_]+(?:@[A-Za-z0-9_.-]+)?\.md")


class GoldenRefused(UserError, RuntimeError):
    """An update that must not run (under CI, or memU goldens not asked for by name)."""


@dataclass(frozen=True)
class Difference:
    """One way the render and the goldens disagree."""

    kind: str  # "changed", "mode", "missing", "orphan" (golden only), "unrecorded" (TXT-7)
    path: str  # relative to the golden folder
    detail: str = ""  # the diff (for MISSING, the whole file as a diff from nothing)
    summary: str = ""  # one line shown instead of the diff (a manifest's), "" for none

    @property
    def backends(self) -> tuple[str, ...]:
        """The backends whose update accepts this difference."""
        if self.kind == "unrecorded":
            return tuple(n for n, b in BACKENDS.items() if b.goldens.records_shipped_prompts)
        return (self.path.split("/", 1)[0],)

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
    """Everything ``check`` found: differences, wording problems, and how many files it saw.

    ``rendered_from`` is the folder whose templates were rendered; ``places`` says where in
    them each wording problem was written (see ``provisioner.golden.places``).
    """

    differences: list[Difference] = field(default_factory=list)
    wording: list[WordingProblem] = field(default_factory=list)
    files_checked: int = 0
    rendered_from: Path | None = None
    places: dict[WordingProblem, WordingPlace] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.wording

    @property
    def problem_count(self) -> int:
        return len(self.differences) + len(self.wording)

    def backends_differing(self) -> list[str]:
        """Backends with a difference an update of theirs would accept, in registry order."""
        named = {backend for difference in self.differences for backend in difference.backends}
        return [name for name in BACKEND_NAMES if name in named]

    def backends_misworded(self) -> list[str]:
        """Backends with wording problems, which their update refuses to freeze (GOLD-5)."""
        named = {problem.backend for problem in self.wording}
        return [name for name in BACKEND_NAMES if name in named]


@dataclass
class UpdateResult:
    """What ``apply_update`` wrote, and what a check would still find in the backends left."""

    touched: list[str]
    backends: tuple[str, ...]
    left: CheckReport


def default_golden_dir() -> Path:
    """``golden/`` of the checkout the current folder is in (it or a folder above it).

    Raises ``GoldenRefused`` when it is in none: an installed package has no goldens, and a
    folder that merely has a ``golden/`` is someone else's.
    """
    here = Path.cwd()
    for root in (here, *here.parents):
        if is_checkout(root):
            return root / "golden"
    raise GoldenRefused(
        f"{here}: not a checkout of {PACKAGE_NAME} (golden/ beside templates/ and a "
        "pyproject.toml naming it); run from a checkout or name the folder with --golden-dir"
    )


def is_checkout(root: Path) -> bool:
    """``root`` has ``golden/`` and ``templates/`` beside a pyproject.toml naming this package."""
    if not ((root / "golden").is_dir() and (root / "templates").is_dir()):
        return False
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return re.search(rf'(?m)^name\s*=\s*"{re.escape(PACKAGE_NAME)}"\s*$', text) is not None


def usable_golden_dir(golden_dir: Path, *, must_exist: bool) -> Path:
    """``golden_dir`` when it is a folder (or, for an update, not there yet); else refused."""
    if golden_dir.is_dir():
        return golden_dir
    if golden_dir.exists() or golden_dir.is_symlink() or must_exist:
        raise GoldenRefused(f"{golden_dir}: not a folder; expected the golden/ folder")
    return golden_dir


def is_golden_name(path: str) -> bool:
    """Whether ``path`` (below the golden folder) is a name a golden of this package has."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] not in BACKENDS:
        return False
    if parts[1] == TEXTS_DIR:
        return len(parts) == 3 and _TEXT_NAME.fullmatch(parts[2]) is not None
    return parts[1] in PROFILES


def render_expected(
    scratch: Path, backends: Iterable[str] = BACKEND_NAMES
) -> dict[str, RenderedFile]:
    """Render the workspaces and runtime texts of ``backends`` below ``scratch``.

    Keyed by golden path (``<backend>/<profile>/…``, ``<backend>/texts/…``).
    """
    from provisioner.templating import texts

    chosen = tuple(backends)
    expected: dict[str, RenderedFile] = {}
    for backend in chosen:
        for profile in PROFILES:
            answers = Answers(profile=profile, memory_backend=backend)
            for rendered in render_workspace(answers, scratch / backend / profile):
                expected[f"{backend}/{profile}/{rendered.path}"] = rendered
    import jinja2

    try:
        for text in texts.all_texts():
            if text.backend in chosen:
                body = text.body.encode()
                rendered = RenderedFile(text.file_name, body, executable=False)
                expected[f"{text.backend}/{TEXTS_DIR}/{text.file_name}"] = rendered
    except jinja2.TemplateError as error:
        raise template_broken(error) from None
    return expected


def check(golden_dir: Path) -> CheckReport:
    """Compare a fresh render with ``golden_dir``; writes nothing there (GOLD-2, GOLD-5)."""
    with tempfile.TemporaryDirectory(prefix="nerve-golden-") as scratch:
        expected = render_expected(Path(scratch))
    return _report(expected, golden_dir, BACKEND_NAMES, prompts=True)


def _report(
    expected: Mapping[str, RenderedFile],
    golden_dir: Path,
    backends: Iterable[str],
    *,
    prompts: bool,
) -> CheckReport:
    """The check of the renders of ``backends`` in ``expected`` against ``golden_dir``.

    ``prompts``: also report memU job prompts missing from the shipped-prompt registry.
    """
    chosen = tuple(backends)
    mine = {path: file for path, file in expected.items() if path.split("/", 1)[0] in chosen}
    root = active_folder().root
    report = CheckReport(files_checked=len(mine), rendered_from=root)
    if not chosen:
        return report
    report.differences = compare(mine, read_goldens(golden_dir, chosen), golden_dir)
    report.wording = lint_renders(mine) + lint_runtime_texts(chosen)
    report.places = wording_places(report.wording, mine, root)
    if prompts and any(BACKENDS[name].goldens.records_shipped_prompts for name in chosen):
        report.differences += [
            Difference("unrecorded", f"templates/{SHIPPED_PROMPTS_NAME}: {job}")
            for job in jobs.unrecorded_memu_prompts()
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
            assert rendered is not None  # a path comes from one side or the other
            differences.append(Difference("missing", path, new_file_detail(path, rendered.content)))
        elif rendered is None:
            differences.append(Difference("orphan", path))
        else:
            if rendered.content != golden.content:
                detail = unified_diff(golden.content, rendered.content, path)
                structure = structural_summary(path, golden.content, rendered.content)
                if structure:
                    detail += "structure:\n" + "".join(f"  {line}\n" for line in structure)
                summary = ""
                if is_manifest(path):
                    summary = manifest_summary(golden.content, rendered.content)
                differences.append(Difference("changed", path, detail, summary))
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


def ci_is_set(env: Mapping[str, str]) -> bool:
    """Whether ``CI`` is true, under which ``update`` is refused (GOLD-3)."""
    return env.get("CI", "").strip().lower() in CI_TRUE_WORDS


def update(golden_dir: Path, backends: Iterable[str], *, env: Mapping[str, str]) -> list[str]:
    """Rewrite the goldens of ``backends`` and remove their orphans (GOLD-3).

    Refused (``GoldenRefused``) when ``CI`` is true (CI checks goldens, it never makes them)
    and when the render breaks the wording rules (GOLD-5): a golden is never a violation.
    Returns the golden paths that were written or removed. Files are replaced one by one
    through a temporary name, so an interrupted update leaves each file whole.
    """
    return apply_update(golden_dir, backends, env=env).touched


def apply_update(
    golden_dir: Path,
    backends: Iterable[str],
    *,
    env: Mapping[str, str],
    also_check: Iterable[str] = (),
) -> UpdateResult:
    """``update``, and the check of the backends ``also_check`` it leaves as they are.

    One render serves both, so ``nerve golden update`` without ``--backend`` can say what is
    left for the protected backends (memU) without rendering twice. ``left`` is that check;
    it includes unrecorded memU prompts unless this update recorded them.
    """
    if ci_is_set(env):
        raise GoldenRefused("golden update is refused while CI is set; run it locally")
    golden_dir = usable_golden_dir(golden_dir, must_exist=False)
    chosen = tuple(backends)
    others = tuple(name for name in also_check if name not in chosen)
    with tempfile.TemporaryDirectory(prefix="nerve-golden-") as scratch:
        rendered = render_expected(Path(scratch), chosen + others)
    expected = {path: file for path, file in rendered.items() if path.split("/", 1)[0] in chosen}
    problems = lint_renders(expected) + lint_runtime_texts(chosen)
    if problems:
        first = problems[0]
        place = wording_places([first], expected, active_folder().root)[first]
        where = f" at {place.sources[0]}" if place.sources else ""
        count = f"{len(problems)} wording problem{'s' if len(problems) != 1 else ''}"
        raise GoldenRefused(
            f"golden update refused: {count}, the first: {first}{where}; "
            f"see {command('golden check')}"
        )
    goldens = read_goldens(golden_dir, chosen)
    touched: list[str] = []
    recording = any(BACKENDS[name].goldens.records_shipped_prompts for name in chosen)
    if recording and jobs.record_current_memu_prompts():
        touched.append(f"templates/{SHIPPED_PROMPTS_NAME}")
    for difference in compare(expected, goldens, golden_dir):
        target = golden_dir / difference.path
        if difference.kind == "orphan":
            if not is_golden_name(difference.path) or target.is_symlink():
                continue  # not a golden's name: someone else's file, left alone
            target.unlink()
            _remove_empty_parents(target.parent, golden_dir)
        else:
            written = expected[difference.path]
            with faults_named(target):  # REL-4: a full or read-only golden folder, one line
                write_atomically(target, written.content, file_mode(written.executable))
        touched.append(difference.path)
    left = _report(rendered, golden_dir, others, prompts=not recording)
    return UpdateResult(sorted(set(touched)), chosen, left)


def _remove_empty_parents(folder: Path, stop: Path) -> None:
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent
