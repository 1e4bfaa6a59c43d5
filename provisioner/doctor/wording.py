"""Doctor's wording lint of the workspace's own files (OPS-2).

``nerve golden check`` holds the shipped wording to the backend it was rendered for (GOLD-5),
but the workspace is the agent's to edit, and ``nerve init`` keeps every edited file when an
instance switches backend. A kept ``MEMORY.md`` that still says ``mcp__nerve__memorize`` after
a switch to Loom sends the agent after a tool its sessions do not have, and nothing else would
notice. So doctor runs the same comparison (``provisioner.templating.wording``, one source of
the tool lists: the backend registry) over the files the agent reads: the prompt files at the
workspace's top and every ``SKILL.md`` under ``skills/``. Each place is one WARN naming the
file, the line and the tool, with the command that shows the shipped wording.

The agent may be prompt-injected into planting anything here, so reading is bounded: no link
is followed (every folder and file is opened relative to its parent with ``O_NOFOLLOW``), only
regular files are opened and only their first ``LINT_FILE_MAX_BYTES`` are read, a file that is
not UTF-8 is reported and skipped, and the number of files, folder entries and lines shown are
capped. Only file names, line numbers and tool names are printed, never the files' text.
"""

from __future__ import annotations

import bisect
import errno
import functools
import os
import re
import shlex
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.backends import Backend, get_backend
from provisioner.base.command import command, program_words
from provisioner.doctor.check import OK, WARN, Check, joined
from provisioner.doctor.cron_prompts import CRON_FILES, CRON_FOLDER, NOT_A_JOBS_FILE, prompt_view
from provisioner.runtime.face import CAUSE_OF_KIND, FileFault
from provisioner.templating.folder import ACTIVE_FOLDER, ContractFixtureError
from provisioner.templating.wording import NamedTool, places_not_nameable
from provisioner.workspace.fs import WorkspaceRefused, WorkspaceRoot

# The files Nerve puts into a session's prompt (its prompt files, and MEMORY.md, NERVE-6), in
# the order a workspace lists them; a profile has only some of them.
AGENT_FILES = ("AGENTS.md", "TOOLS.md", "MEMORY.md", "SOUL.md", "IDENTITY.md", "USER.md", "TASK.md")
SKILLS_FOLDER = "skills"
SKILL_FILE = "SKILL.md"
LINT_FILE_MAX_BYTES = 256 * 1024  # our choice: shipped files are a few KiB; read no further
LINT_MAX_FILES = 100  # our choice: a workspace ships about ten; the rest are counted, not read
SKILLS_MAX_DEPTH = 3  # our choice: skills/<name>/SKILL.md and one folder deeper are read
SKILLS_MAX_ENTRIES = 2_000  # our choice: entries under skills/ looked at, all folders together
UNREAD_SHOWN = 5  # our choice: files not read that the first line names before "and N more"
FINDINGS_PER_FILE = 5  # our choice: places shown for one file before "and N more"
FINDINGS_SHOWN = 30  # our choice: places shown in all before "N more in M files"
MENTIONS_COUNTED_MAX = 2_000  # our choice: a file's tool mentions looked at; bounds the cost
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # as an editor counts lines
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK = "a link"
# FLEET-4: ids past the places listed: workspace.tool_names.FILE:more, ….more_files
MORE_PLACES, MORE_FILES = "more", "more_files"


@dataclass(frozen=True)
class Finding:
    """One line of one workspace file naming a tool the configured backend's sessions lack."""

    path: str
    line: int
    named: NamedTool


@dataclass(frozen=True)
class FileFindings:
    """A file's first ``FINDINGS_PER_FILE`` places, in line order, and how many it has in all.

    ``counted_all`` is False when counting stopped at ``MENTIONS_COUNTED_MAX`` mentions.
    """

    first: list[Finding]
    total: int
    counted_all: bool = True


@dataclass
class WorkspaceLint:
    """What the lint read, what it found, and what it could not read, with why."""

    read: list[str] = field(default_factory=list)
    findings: dict[str, FileFindings] = field(default_factory=dict)
    unread: list[tuple[str, str]] = field(default_factory=list)
    partly_read: list[str] = field(default_factory=list)
    not_reached: int = 0
    entries_left: int = SKILLS_MAX_ENTRIES

    def places(self) -> str:
        """How many places all files have, ``at least`` when a count stopped early."""
        return _places_count(list(self.findings.values()))


def lint_workspace(
    workspace: Path,
    allowed: Collection[str],
    skip: Collection[str] = (),
    backend: str | None = None,
) -> WorkspaceLint:
    """Lint the files the agent reads against ``allowed``, the tools its sessions have; with
    ``backend``, the cron jobs' prompts that run as written under it too (``cron_prompts``).

    ``skip`` names files (workspace-relative) not to read. Never raises for what the workspace
    holds: a link, a FIFO, a huge or non-UTF-8 file, a folder that cannot be opened are each
    recorded in ``unread`` or ``partly_read``.
    """
    lint = WorkspaceLint()
    try:
        with WorkspaceRoot(workspace) as root, root.folder("", create=False) as top:
            assert top is not None  # the workspace folder itself
            for name in AGENT_FILES:
                if name not in skip:
                    _lint_file(lint, top, name, name, allowed)
            _lint_skills(lint, root, allowed, skip)
            if backend is not None:
                _lint_cron(lint, root, allowed, skip, backend)
    except WorkspaceRefused:
        lint.unread.append((".", "cannot be opened"))
    except FileFault as fault:  # REL-4: permission or I/O, said as such
        lint.unread.append((".", f"cannot be opened ({CAUSE_OF_KIND[fault.kind]})"))
    return lint


def _lint_cron(
    lint: WorkspaceLint,
    root: WorkspaceRoot,
    allowed: Collection[str],
    skip: Collection[str],
    backend: str,
) -> None:
    try:
        with root.folder(CRON_FOLDER, create=False) as folder:
            if folder is None:
                return
            view = functools.partial(prompt_view, backend=backend)
            for name in CRON_FILES:
                relative = f"{CRON_FOLDER}/{name}"
                if relative not in skip:
                    _lint_file(lint, folder, name, relative, allowed, view)
    except WorkspaceRefused as refused:
        reason = _LINK if "symbolic link" in str(refused) else "not a folder"
        lint.unread.append((CRON_FOLDER, reason))


def _lint_skills(
    lint: WorkspaceLint, root: WorkspaceRoot, allowed: Collection[str], skip: Collection[str]
) -> None:
    try:
        with root.folder(SKILLS_FOLDER, create=False) as folder:
            if folder is not None:
                _walk(lint, folder, SKILLS_FOLDER, 1, allowed, skip)
    except WorkspaceRefused as refused:
        reason = _LINK if "symbolic link" in str(refused) else "not a folder"
        lint.unread.append((SKILLS_FOLDER, reason))


def _walk(
    lint: WorkspaceLint,
    folder: int,
    prefix: str,
    depth: int,
    allowed: Collection[str],
    skip: Collection[str],
) -> None:
    """Every ``SKILL.md`` below ``folder`` (an open descriptor), links reported, not followed."""
    names: list[str] = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if lint.entries_left <= 0:
                    lint.unread.append((prefix, "more entries than doctor looks at"))
                    break
                lint.entries_left -= 1
                names.append(entry.name)
    except OSError:
        lint.unread.append((prefix, "cannot be listed"))
    for name in sorted(names):
        relative = f"{prefix}/{name}"
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            if name == SKILL_FILE or depth == 1:  # a skill, or a skill folder, Nerve would read
                lint.unread.append((relative, _LINK))
        elif stat.S_ISDIR(info.st_mode) and depth < SKILLS_MAX_DEPTH:
            try:
                child = os.open(name, _FOLDER_FLAGS, dir_fd=folder)
            except OSError:
                lint.unread.append((relative, "cannot be opened"))
                continue
            try:
                _walk(lint, child, relative, depth + 1, allowed, skip)
            finally:
                os.close(child)
        elif name == SKILL_FILE and relative not in skip:
            _lint_file(lint, folder, name, relative, allowed)


def _lint_file(
    lint: WorkspaceLint,
    folder: int,
    name: str,
    relative: str,
    allowed: Collection[str],
    view: Callable[[str], str | None] | None = None,
) -> None:
    """Read one file (bounded, never through a link) and record what it names; ``view``
    gives the part of its text an agent is shown (None: a file it cannot read as meant)."""
    try:
        descriptor = os.open(name, _FILE_FLAGS, dir_fd=folder)
    except FileNotFoundError:
        return
    except OSError as error:
        lint.unread.append((relative, _LINK if error.errno == errno.ELOOP else "cannot be read"))
        return
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            lint.unread.append((relative, "not a plain file"))
            return
        if len(lint.read) >= LINT_MAX_FILES:
            lint.not_reached += 1
            return
        try:
            content = handle.read(LINT_FILE_MAX_BYTES + 1)
        except OSError:
            lint.unread.append((relative, "cannot be read"))
            return
    partial = len(content) > LINT_FILE_MAX_BYTES
    text = _decoded(content[:LINT_FILE_MAX_BYTES], partial)
    if text is None:
        lint.unread.append((relative, "not UTF-8 text"))
        return
    if view is not None and (text := view(text)) is None:
        lint.unread.append((relative, NOT_A_JOBS_FILE))
        return
    lint.read.append(relative)
    if partial:
        lint.partly_read.append(relative)
    found = file_findings(relative, text, allowed)
    if found is not None:
        lint.findings[relative] = found


def _decoded(content: bytes, partial: bool) -> str | None:
    """``content`` as UTF-8; a file cut at the read limit loses only its unfinished last line."""
    if partial and b"\n" in content:
        content = content[: content.rindex(b"\n") + 1]
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        cut_in_a_character = partial and error.start >= len(content) - 3
        return content[: error.start].decode("utf-8") if cut_in_a_character else None


def file_findings(relative: str, text: str, allowed: Collection[str]) -> FileFindings | None:
    """The places of ``text`` that name a tool outside ``allowed``; None when there are none.

    A place is one tool on one line, however often the line names it. Only the first few are
    kept: a planted file naming a tool on every line costs a count, not a list.
    """
    seen: set[tuple[int, NamedTool]] = set()
    first: list[tuple[int, int, NamedTool]] = []
    starts: list[int] | None = None
    counted_all = True
    for mentions, (offset, named) in enumerate(places_not_nameable(text, allowed)):
        if mentions >= MENTIONS_COUNTED_MAX:
            counted_all = False
            break
        if starts is None:  # only a file with findings needs its line starts
            starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]
        line = bisect.bisect_right(starts, offset)
        if (line, named) in seen:
            continue
        seen.add((line, named))
        first.append((line, offset, named))
        if len(first) > 2 * FINDINGS_PER_FILE:  # keep the earliest few, by line and place
            first = sorted(first, key=lambda place: place[:2])[:FINDINGS_PER_FILE]
    if not seen:
        return None
    kept = sorted(first, key=lambda place: place[:2])[:FINDINGS_PER_FILE]
    listed = [Finding(relative, line, named) for line, _offset, named in kept]
    return FileFindings(listed, len(seen), counted_all)


@dataclass(frozen=True)
class Advice:
    """What the checks need besides the findings: where the workspace is and what it shipped."""

    workspace: Path
    backend: Backend
    shipped: Collection[str] = ()
    recorded_wording: object = None

    def for_file(self, relative: str) -> str:
        """The exact ``nerve diff`` command for a shipped file, else how to fix it by hand."""
        if relative in self.shipped:
            words = [*program_words(), "diff", "--workspace", str(self.workspace)]
            if self.recorded_wording != self.backend.name:
                words += ["--memory-backend", self.backend.name]
            return f"`{shlex.join([*words, relative])}` shows the shipped wording"
        return (
            f"name the tools {self.backend.display_name} sessions have instead: nerve init "
            f"did not record {relative}, so there is no shipped wording to compare"
        )


def tool_name_checks(
    workspace: Path,
    backend: str,
    shipped: Collection[str] = (),
    recorded_wording: object = None,
    skip: Collection[str] = (),
) -> list[Check]:
    """The lint as checks: ``workspace.tool_names``, then ``workspace.tool_names.FILE:LINE:TOOL``
    for each place (``FILE:more`` and ``more_files`` past those shown).

    ``shipped`` are the files the manifest records (they have a ``nerve diff``), and
    ``recorded_wording`` the backend they were worded for. A missing or damaged contract
    fixture (Loom's tool list is never guessed) is one WARN instead of the lint.
    """
    advice = Advice(workspace, get_backend(backend), shipped, recorded_wording)
    try:
        allowed = advice.backend.nameable_tools(ACTIVE_FOLDER)
    except ContractFixtureError as error:
        return [
            Check(
                "workspace.tool_names",
                WARN,
                f"the workspace's files were not linted: {error}",
                advice="reinstall nerve-provisioner; its Loom contract fixture is damaged",
            )
        ]
    lint = lint_workspace(workspace, allowed, skip, backend)
    return [_head(lint, advice, bool(skip)), *_places(lint, advice)]


def _head(lint: WorkspaceLint, advice: Advice, skipped: bool) -> Check:
    read = f"{_count(len(lint.read), 'file')} the agent reads"
    if lint.findings:
        named = _count(len(lint.findings), "names", "name")
        message = f"{read}: {named} tools {_sessions(advice)} do not have, in {lint.places()}"
    else:
        message = f"{read}: none names a tool {_sessions(advice)} do not have"
    if skipped:
        message += " (those still as shipped are left to workspace.wording)"
    problems = _unread(lint)
    if problems:
        message += f"; {problems}"
    if not lint.findings and not problems:
        return Check("workspace.tool_names", OK, message)
    todo = []
    if lint.findings:
        todo.append("each place is listed below with how to see the shipped wording")
    if problems:
        todo.append(
            f"doctor reads only plain UTF-8 files inside the workspace, "
            f"{LINT_FILE_MAX_BYTES // 1024} KiB each: check the rest by hand"
        )
    return Check("workspace.tool_names", WARN, message, advice="; ".join(todo))


def _unread(lint: WorkspaceLint) -> str:
    parts = []
    if lint.unread:
        shown = joined(f"{path} ({why})" for path, why in lint.unread[:UNREAD_SHOWN])
        parts.append(f"not read: {shown}{_and_more(len(lint.unread))}")
    if lint.partly_read:
        size = f"{LINT_FILE_MAX_BYTES // 1024} KiB"
        shown = joined(lint.partly_read[:UNREAD_SHOWN])
        parts.append(f"read only the first {size} of {shown}{_and_more(len(lint.partly_read))}")
    if lint.not_reached:
        parts.append(f"{lint.not_reached} more past the {LINT_MAX_FILES} files doctor reads")
    return "; ".join(parts)


def _and_more(count: int) -> str:
    return f" and {count - UNREAD_SHOWN} more" if count > UNREAD_SHOWN else ""


def _places(lint: WorkspaceLint, advice: Advice) -> list[Check]:
    """One WARN a place, at most ``FINDINGS_PER_FILE`` a file and ``FINDINGS_SHOWN`` in all."""
    checks: list[Check] = []
    shown = 0
    files = list(lint.findings.items())
    for index, (relative, found) in enumerate(files):
        if shown >= FINDINGS_SHOWN:
            checks.append(_more_files(files[index:], advice))
            break
        fix = advice.for_file(relative)
        visible = found.first[: FINDINGS_SHOWN - shown]
        for finding in visible:
            message = (
                f"{relative}:{finding.line}: names {finding.named.ref}, {_why(finding, advice)}"
            )
            where = f"{advice.workspace / relative}:{finding.line}"
            place = f"{relative}:{finding.line}:{finding.named.ref}"
            checks.append(_place(place, message, fix, where))
        shown += len(visible)
        if found.total > len(visible):
            more = _places_count([found], shown=len(visible), more=True)
            message = f"{relative}: {more} naming tools {_sessions(advice)} do not have"
            where, place = str(advice.workspace / relative), f"{relative}:{MORE_PLACES}"
            checks.append(_place(place, message, fix, where))
    return checks


def _place(name: str, message: str, fix: str, where: str | None) -> Check:
    """One place, its id named by the place, never its position (FLEET-4): a monitor follows
    it from run to run, and two tools named on one line are two ids."""
    return Check(f"workspace.tool_names.{name}", WARN, message, advice=fix, source=where)


def _more_files(rest: list[tuple[str, FileFindings]], advice: Advice) -> Check:
    places = _places_count([found for _path, found in rest], more=True)
    names = [path for path, _found in rest]
    listed = joined(names[:UNREAD_SHOWN]) + _and_more(len(names))
    message = (
        f"{places} naming tools {_sessions(advice)} do not have, "
        f"in {_count(len(names), 'more file')}: {listed}"
    )
    return _place(
        MORE_FILES, message, f"fix the places above and run {command('doctor')} again", None
    )


def _places_count(files: list[FileFindings], shown: int = 0, more: bool = False) -> str:
    """``3 places``, ``1 more place``, ``at least 1000 more places`` (a count stopped early)."""
    total = sum(found.total for found in files) - shown
    words = _count(total, "more place" if more else "place")
    return words if all(found.counted_all for found in files) else f"at least {words}"


def _why(finding: Finding, advice: Advice) -> str:
    if finding.named.owner == advice.backend.name:
        return f"which is not among the tools {_sessions(advice)} get by default"
    return f"which {_sessions(advice)} do not have"


def _sessions(advice: Advice) -> str:
    return f"{advice.backend.display_name} sessions"


def _count(number: int, one: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``; ``many`` when the plural is not ``one`` + s."""
    return f"{number} {one}" if number == 1 else f"{number} {many or one + 's'}"
