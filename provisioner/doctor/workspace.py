"""Doctor's workspace checks: the recorded profile and wording, and the files init shipped.

``nerve init`` records its answers and a digest of every file it wrote in
``.nerve/provisioned.json`` (INIT-4). Doctor compares each recorded file with the disk: still
as shipped, edited, or missing; and it compares the recorded wording with the configured
backend, since a platform that switched to Loom after its first init still has memU's wording
until ``nerve init --memory-backend loom`` runs. It also counts ``MEMORY.md`` as Nerve does:
Nerve puts only its first 300 lines into a session's system prompt, so the rest is never seen.

The files the agent reads are also linted for tools the configured backend's sessions do not
have (OPS-2, ``provisioner.doctor.wording``): a file edited before a switch is kept by init
and may still name the old backend's tools.

The workspace belongs to the agent, which may be hostile, so the manifest is read with care:
a recorded path that leaves the workspace, or passes through a link, is not followed; only
regular files are opened (a FIFO would block); a file larger than any this package ships
counts as edited without being read; and the number of entries is capped. A manifest that is
not what init writes (garbage, an unknown format, too large, too deep) is an ERR naming it, with
what to do (REL-12): never "not provisioned, run init", which would provision the workspace
again from the default answers.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from provisioner.backends import BACKEND_NAMES
from provisioner.base.command import program_words
from provisioner.base.errors import UserError
from provisioner.config.local_file import switch_line
from provisioner.config.model import Config
from provisioner.doctor.check import ERR, OK, WARN, Check, joined
from provisioner.doctor.wording import tool_name_checks
from provisioner.workspace.records import RecordDamaged
from provisioner.workspace.render import MANIFEST_PATH
from provisioner.workspace.state import Manifest, read_manifest

SHIPPED_FILE_MAX_BYTES = 4 * 1024 * 1024  # our choice: no shipped file comes near this
MANIFEST_MAX_FILES = 10_000  # our choice: a workspace ships a few dozen files
NAMES_SHOWN = 5  # how many file names a line lists before "and N more"
MEMORY_MD = "MEMORY.md"
MEMORY_MD_LINES_SHOWN = 300  # NERVE-6: Nerve's system prompt shows MEMORY.md's first 300 lines
MEMORY_MD_MAX_BYTES = 4 * 1024 * 1024  # our choice: counted up to here, far past 300 lines


@dataclass
class FileStates:
    """The recorded files, sorted by what the disk holds now."""

    shipped: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def workspace_checks(workspace: Path, config_dir: Path, config: Config | None) -> list[Check]:
    """The workspace's checks; a workspace that is absent or unprovisioned is one check."""
    if not workspace.is_dir():
        return [
            Check(
                "workspace.manifest",
                ERR,
                f"no workspace folder at {workspace}",
                advice=f"run {_init_command(workspace, config_dir)}, or pass --workspace",
            )
        ]
    try:
        manifest = _manifest(workspace)
    except RecordDamaged as error:  # REL-12
        source = str(workspace / MANIFEST_PATH)
        damaged = Check("workspace.manifest", ERR, error.what, advice=error.advice, source=source)
        return [damaged, *memory_md_checks(workspace)]
    if manifest is None:
        unprovisioned = Check(
            "workspace.manifest",
            WARN,
            f"{workspace} has no readable {MANIFEST_PATH}: it was not provisioned by "
            "nerve init, so its profile, wording and files are unknown",
            advice=f"run {_init_command(workspace, config_dir)}",
        )
        lint = tool_name_checks(workspace, config.memory_backend) if config else []
        return [unprovisioned, *memory_md_checks(workspace), *lint]
    answers = dict(manifest.answers)
    source = str(workspace / MANIFEST_PATH)
    checks = [profile_check(answers, source)]
    states = file_states(workspace, dict(manifest.files))
    checks.append(files_check(states, workspace, config_dir))
    if config is None:
        return [*checks, *memory_md_checks(workspace)]
    checks.append(wording_check(answers, config, workspace, config_dir, source))
    return [*checks, *memory_md_checks(workspace), *_lint(workspace, manifest, states, config)]


def _lint(workspace: Path, manifest: Manifest, states: FileStates, config: Config) -> list[Check]:
    """The wording lint of the workspace's own files (OPS-2).

    While the files are worded for another backend, those still as shipped are left to
    ``workspace.wording``: its ``nerve init`` re-words them all, so listing each of their
    places would only repeat it. Edited files are linted whatever the wording.
    """
    wording = manifest.answers.get("memory_backend")
    backend = config.memory_backend
    as_shipped = states.shipped if wording != backend else []
    shipped = [str(path) for path in list(manifest.files)[:MANIFEST_MAX_FILES]]
    return tool_name_checks(workspace, backend, shipped, wording, skip=as_shipped)


def profile_check(answers: dict, source: str) -> Check:
    profile = str(answers.get("profile", "unknown"))
    wording = str(answers.get("memory_backend", "unknown"))
    message = f"profile {profile}, files worded for {wording} (recorded at the last nerve init)"
    return Check("workspace.profile", OK, message, source=source)


def files_check(states: FileStates, workspace: Path, config_dir: Path) -> Check:
    """OK while every shipped file is there (edits are the owner's right); WARN for missing."""
    parts = [f"{len(states.shipped)} as shipped"]
    if states.edited:
        parts.append(f"{len(states.edited)} edited ({_names(states.edited)})")
    if not states.missing:
        return Check("workspace.files", OK, ", ".join(parts))
    parts.append(f"{len(states.missing)} missing ({_names(states.missing)})")
    return Check(
        "workspace.files",
        WARN,
        ", ".join(parts),
        advice=f"run {_init_command(workspace, config_dir)} to write the missing files again",
    )


def wording_check(
    answers: dict, config: Config, workspace: Path, config_dir: Path, source: str
) -> Check:
    """WARN when the files are worded for another backend than the configured one."""
    wording = answers.get("memory_backend")
    backend = config.memory_backend
    if wording == backend:
        return Check(
            "workspace.wording",
            OK,
            f"files worded for {backend}, the configured backend",
            source=source,
        )
    recorded = wording if wording in BACKEND_NAMES else f"an unknown backend ({wording!r})"
    advice = f"run {_init_command(workspace, config_dir, backend)}"
    if wording in BACKEND_NAMES:  # FLEET-4: the files may be the side intended
        line = switch_line(config, str(wording), config_dir)
        advice += f"; or, to switch the instance to {wording} as its files are worded, {line}"
    return Check(
        "workspace.wording",
        WARN,
        f"files worded for {recorded}, but memory.backend is {backend}",
        advice=advice,
        source=source,
    )


def memory_md_checks(workspace: Path) -> list[Check]:
    """How much of ``MEMORY.md`` a session sees (NERVE-6); no check when there is no such file.

    Nerve puts only the first 300 lines of ``MEMORY.md`` into a session's system prompt, so a
    longer file WARNs: what is past that line is never seen. Lines are counted as Nerve counts
    them (the text read as UTF-8 with any line ending, blank lines at either end dropped). A
    file that is not plain (a link, a FIFO) is never opened, and one Nerve cannot read as UTF-8
    shows nothing at all: both WARN too.
    """
    path = workspace / MEMORY_MD
    try:
        info = path.lstat()
    except OSError:
        return []
    if not stat.S_ISREG(info.st_mode):
        return [
            _memory_md_warning(
                f"{MEMORY_MD} is a link or not a plain file; doctor does not open it",
                f"make {MEMORY_MD} a plain file in the workspace",
                path,
            )
        ]
    if info.st_size > MEMORY_MD_MAX_BYTES:
        size = f"{MEMORY_MD_MAX_BYTES // (1024 * 1024)} MiB"
        return [_too_long(f"{MEMORY_MD} is over {size}, far more than Nerve shows", path)]
    content = _read_plain(path, MEMORY_MD_MAX_BYTES)
    if content is None:
        return [
            _memory_md_warning(
                f"{MEMORY_MD} cannot be read: Nerve shows none of it",
                f"make {MEMORY_MD} readable by the user Nerve runs as",
                path,
            )
        ]
    try:
        lines = nerve_line_count(content.decode("utf-8"))
    except UnicodeDecodeError:
        return [
            _memory_md_warning(
                f"{MEMORY_MD} is not UTF-8 text: Nerve cannot read it and shows none of it",
                f"save {MEMORY_MD} as UTF-8",
                path,
            )
        ]
    if lines > MEMORY_MD_LINES_SHOWN:
        hidden = lines - MEMORY_MD_LINES_SHOWN
        return [_too_long(f"{MEMORY_MD} has {lines} lines: the last {hidden} are never seen", path)]
    message = f"{MEMORY_MD} has {lines} lines, all within the {MEMORY_MD_LINES_SHOWN} Nerve shows"
    return [Check("workspace.memory_md", OK, message, source=str(path))]


def nerve_line_count(text: str) -> int:
    """How many lines Nerve counts in ``text``: any line ending, blank lines at the ends dropped."""
    stripped = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    return len(stripped.split("\n")) if stripped else 0


def _too_long(message: str, path: Path) -> Check:
    shown = f"Nerve shows only the first {MEMORY_MD_LINES_SHOWN} lines in a session"
    advice = (
        f"keep in {MEMORY_MD} only what every session needs, at most {MEMORY_MD_LINES_SHOWN} "
        "lines; move the rest to long-term memory or a skill"
    )
    return _memory_md_warning(f"{message} ({shown})", advice, path)


def _memory_md_warning(message: str, advice: str, path: Path) -> Check:
    return Check("workspace.memory_md", WARN, message, advice=advice, source=str(path))


def _read_plain(path: Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of the plain file at ``path``, never through a link; None if it
    cannot be opened."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read(limit)


def file_states(workspace: Path, recorded: dict) -> FileStates:
    """Sort the manifest's files into shipped, edited and missing."""
    states = FileStates()
    for path, digest in list(recorded.items())[:MANIFEST_MAX_FILES]:
        if path == MANIFEST_PATH:
            continue
        name = str(path)
        state = _state_of(workspace, name, digest)
        getattr(states, state).append(name)
    return states


def _state_of(workspace: Path, relative: str, digest: object) -> str:
    """``shipped``, ``edited`` or ``missing`` for one recorded path, without following links."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts or "\\" in relative:
        return "edited"  # not a path init writes: never looked up
    current = workspace
    for part in parts[:-1]:
        current = current / part
        if current.is_symlink():
            return "edited"
    target = workspace.joinpath(*parts)
    try:
        info = target.lstat()
    except OSError:
        return "missing"
    if not stat.S_ISREG(info.st_mode) or info.st_size > SHIPPED_FILE_MAX_BYTES:
        return "edited"
    return "shipped" if _digest(target) == digest else "edited"


def _digest(path: Path) -> str | None:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        content = handle.read(SHIPPED_FILE_MAX_BYTES + 1)
    return "sha256:" + hashlib.sha256(content).hexdigest()


def _manifest(workspace: Path) -> Manifest | None:
    """The manifest, or None when there is none, or it is a link or not a plain file (never
    followed or opened). A damaged one raises ``RecordDamaged`` (REL-12)."""
    path = workspace / MANIFEST_PATH
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    try:
        return read_manifest(workspace)
    except RecordDamaged:
        raise
    except UserError:  # a link on the way to it: never followed, so no manifest
        return None


def _names(paths: list[str]) -> str:
    shown = joined(sorted(paths)[:NAMES_SHOWN])
    more = len(paths) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _init_command(workspace: Path, config_dir: Path, backend: str | None = None) -> str:
    words = [*program_words(), "init"]
    if backend is not None:
        words += ["--memory-backend", backend]
    words += ["--workspace", str(workspace), "--config-dir", str(config_dir)]
    return shlex.join(words)
