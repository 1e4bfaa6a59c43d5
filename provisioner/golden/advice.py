"""What a failed golden check tells the author to do next (OPS-1, GOLD-3).

The accept command is exact: the ``nerve golden update`` that rewrites every golden the
check found different, with each backend named (memU's goldens change only when named) and
the ``--golden-dir`` the check was given. It never names a backend whose update would be
refused, and there is none at all where every update is refused: under ``CI`` (GOLD-3), or
for a backend whose render has wording problems (GOLD-5, which update never freezes). Each
refusal is said instead, so the author is not sent to a command that fails.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from provisioner.backends import BACKENDS, get_backend
from provisioner.base.command import command
from provisioner.golden.check import CheckReport, ci_is_set

UPDATE_WORDS = "golden update"


@dataclass(frozen=True)
class Acceptance:
    """How the differences of a check can be accepted, and what cannot be.

    ``command`` is None when no update would succeed here; ``backends`` are the ones it
    names; ``refused`` holds one sentence per reason an update would refuse.
    """

    command: str | None
    backends: tuple[str, ...]
    refused: tuple[str, ...]


def update_command(backends: tuple[str, ...], golden_dir_option: Path | None) -> str:
    """``nerve golden update --backend B …[ --golden-dir DIR]``, quoted for a POSIX shell."""
    words = [command(UPDATE_WORDS), *(f"--backend {name}" for name in backends)]
    if golden_dir_option is not None:
        words.append(f"--golden-dir {shlex.quote(str(golden_dir_option))}")
    return " ".join(words)


def acceptance(
    report: CheckReport, *, golden_dir_option: Path | None, env: Mapping[str, str]
) -> Acceptance:
    """The update that accepts ``report``'s differences, or why there is none.

    ``golden_dir_option`` is the ``--golden-dir`` the check was given (None: the checkout's
    own, found again from the same folder).
    """
    misworded = report.backends_misworded()
    refused = [
        f"{get_backend(name).display_name} wording has problems, and update never freezes "
        f"them: fix the WORDING lines above first"
        for name in misworded
    ]
    if report.differences and ci_is_set(env):
        refused.insert(0, "golden update is refused while CI is set: accept changes locally")
        return Acceptance(None, (), tuple(refused))
    backends = tuple(name for name in report.backends_differing() if name not in misworded)
    command = update_command(backends, golden_dir_option) if backends else None
    return Acceptance(command, backends, tuple(refused))


def left_line(left: CheckReport, golden_dir_option: Path | None) -> str:
    """One line on what ``nerve golden update`` without ``--backend`` left to accept.

    "" when nothing is left, i.e. a check would pass in the backends it left alone.
    """
    if left.ok:
        return ""
    parts: list[str] = []
    for name in sorted({*left.backends_differing(), *left.backends_misworded()}):
        files = sum(1 for d in left.differences if name in d.backends)
        problems = sum(1 for p in left.wording if p.backend == name)
        counted = [
            _count(files, "golden difference"),
            _count(problems, "wording problem"),
        ]
        parts.append(f"{', '.join(c for c in counted if c)} for {name}")
    accept = acceptance(left, golden_dir_option=golden_dir_option, env={})
    guarded = [n for n in accept.backends if BACKENDS[n].goldens.by_name_only]
    why = (
        f"{' and '.join(get_backend(n).display_name for n in guarded)} goldens change only "
        "when named"
        if guarded
        else "not updated"
    )
    then = f"accept with: {accept.command}" if accept.command else f"see {command('golden check')}"
    return f"left: {'; '.join(parts)} ({why}); {then}"


def _count(number: int, noun: str) -> str:
    if not number:
        return ""
    return f"{number} {noun}{'' if number == 1 else 's'}"
