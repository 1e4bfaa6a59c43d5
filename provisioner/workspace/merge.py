"""A template change reaches a file the agent edited through a three-way merge (FLEET-3).

For a file init shipped, the agent edited, and this version renders differently, the three
texts are: the **base**, what the package last wrote there; **ours**, the file as it is now;
**theirs**, the new render. The merge is the ``merge3`` library's (the line merge Breezy uses),
never git and never a merge of our own making:

* a clean merge keeps the agent's lines and brings the template's change in; placement writes
  it atomically and reports it as ``merge``;
* a conflict (both changed the same lines) leaves the file exactly as it is and is reported as
  ``conflict`` with a diff3-style preview of each conflicting region. Markers are written into
  the file only when asked (``--conflict inline``), for a person to resolve; a file that still
  holds such markers keeps being reported as a conflict until they are gone.

The base texts are kept per workspace in ``.nerve/bases.json``, by digest: the manifest names
the digest of what init counts as its own at each path, and this file holds the text behind
each digest it (or the journal of an interrupted run) names. It is replaced atomically before
the journal is written, as a superset of what the old and the new manifest name, so an
interruption at any point leaves every named base readable; the next run drops the rest. A
workspace provisioned before bases were kept has none: then the recorded answers are
rendered again, and that render is the base when its digest is the one the manifest names.

The agent can write ``.nerve/bases.json`` too, so a kept text is trusted only when its own
digest is the one it is kept under (REL-11): any other is dropped, and the base is derived
again from the recorded answers as for a workspace without bases, or, failing that, the file
is a conflict left as it is. A merge from a base the agent replaced (by the file as it is now,
say) would take the template's text and drop the agent's lines. A bases file that is not what
the package writes is refused with one line naming it (REL-12,
``provisioner.workspace.records``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass

from provisioner.workspace.fs import WorkspaceRoot
from provisioner.workspace.records import RecordKind, read_record, string_map
from provisioner.workspace.render import RenderedFile

BASES_PATH = ".nerve/bases.json"  # FLEET-3: the texts the package last wrote, by digest
BASES_FORMAT = 1
BASES_MODE = 0o644
BASES_RECORD = RecordKind(  # REL-12
    BASES_PATH,
    "the merge bases nerve-provisioner init keeps",
    "Move it aside and run init again (each base is then derived again from the recorded "
    "answers, and a file whose base cannot be is reported as a conflict, left as it is)",
    BASES_FORMAT,
)
CONFLICT_LEAVE = "leave"  # FLEET-3: a conflicting file is left exactly as it is
CONFLICT_INLINE = "inline"  # FLEET-3: diff3 markers written, only when asked
CONFLICT_CHOICES = (CONFLICT_LEAVE, CONFLICT_INLINE)
# The labels of the diff3 markers: what each side of a conflict is.
OURS_LABEL = "the file as it is"
BASE_LABEL = "what nerve-provisioner last wrote"
THEIRS_LABEL = "what this version writes"
START_MARKER = "<<<<<<< "
BASE_MARKER = "||||||| "
MID_MARKER = "======="
END_MARKER = ">>>>>>> "
MARKED = START_MARKER + OURS_LABEL  # a line only a conflict written inline starts with
PREVIEW_MAX_LINES = 40  # our choice: a preview shows this many lines, then "… N more"

MERGED = "merge"
KEPT = "keep"
CONFLICT = "conflict"


@dataclass(frozen=True)
class MergeOutcome:
    """What merging one edited file gives.

    ``action`` is ``merge`` (``content`` is the merged text, to be written), ``keep`` (the file
    already holds the template's change; nothing to write) or ``conflict`` (``content`` is the
    text with markers, written only under ``--conflict inline``; ``preview`` shows the regions).
    ``new_base`` is whether the manifest may now count the new render as this file's base.
    """

    action: str
    content: bytes | None = None
    preview: str = ""
    new_base: bool = True


def three_way(base: bytes, ours: bytes, theirs: bytes) -> MergeOutcome:
    """Merge the template's change (``base`` → ``theirs``) into the agent's file ``ours``.

    Text that is not UTF-8 cannot be merged line by line: it is a conflict, the file left as
    it is, with a preview saying why.
    """
    try:
        base_lines, our_lines, their_lines = (_lines(text) for text in (base, ours, theirs))
    except UnicodeDecodeError:
        return MergeOutcome(CONFLICT, None, "not UTF-8 text; cannot be merged by lines", False)
    left = unresolved(ours)
    if left is not None:
        return left
    import merge3  # deferred: only a merge needs it, not every command that imports init

    merger = merge3.Merge3(base_lines, our_lines, their_lines)
    conflicted = any(region[0] == "conflict" for region in merger.merge_regions())
    if not conflicted:
        merged = "".join(merger.merge_lines()).encode("utf-8")
        if not _ends_in_newline(base, ours, theirs):
            merged = merged.removesuffix(b"\n")
        return MergeOutcome(KEPT if merged == ours else MERGED, merged)
    marked = list(
        merger.merge_lines(
            name_a=OURS_LABEL,
            name_b=THEIRS_LABEL,
            name_base=BASE_LABEL,
            base_marker=BASE_MARKER.rstrip(),
        )
    )
    return MergeOutcome(CONFLICT, "".join(marked).encode("utf-8"), _preview(marked), False)


def _lines(text: bytes) -> list[str]:
    """``text``'s lines, each ending in a newline (a last line without one gets one), so a
    marker never runs on from a line's end."""
    decoded = text.decode("utf-8")
    return (decoded if not decoded or decoded.endswith("\n") else decoded + "\n").splitlines(
        keepends=True
    )


def _ends_in_newline(base: bytes, ours: bytes, theirs: bytes) -> bool:
    """Whether the merged text ends in a newline: the agent's choice where it changed it,
    else the template's."""
    base_has, ours_has, theirs_has = (t.endswith(b"\n") or not t for t in (base, ours, theirs))
    return ours_has if ours_has != base_has else theirs_has


def _preview(marked: list[str]) -> str:
    """The conflicting regions of ``marked`` (diff3 style), each headed by its line number."""
    shown: list[str] = []
    inside = False
    for number, line in enumerate(marked, start=1):
        if line.startswith(START_MARKER):
            inside = True
            shown.append(f"@@ line {number} @@\n")
        if inside:
            shown.append(line if line.endswith("\n") else line + "\n")
        if line.startswith(END_MARKER):
            inside = False
    return _cut(shown)


def unresolved(ours: bytes) -> MergeOutcome | None:
    """A conflict when ``ours`` still holds markers a ``--conflict inline`` run wrote."""
    if MARKED.encode("utf-8") not in ours:
        return None
    lines = ours.decode("utf-8", errors="replace").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(MARKED)), None)
    if start is None:
        return None
    heading = f"@@ line {start + 1}: markers written earlier, not yet resolved @@\n"
    return MergeOutcome(CONFLICT, None, _cut([heading, *lines[start:]]), False)


def _cut(lines: list[str]) -> str:
    if len(lines) <= PREVIEW_MAX_LINES:
        return "".join(lines)
    more = len(lines) - PREVIEW_MAX_LINES
    return "".join(lines[:PREVIEW_MAX_LINES]) + f"… {more} more lines\n"


@dataclass
class Bases:
    """The base texts a workspace keeps, by digest, as read from ``.nerve/bases.json``.

    ``fallback`` renders the recorded answers again (for a workspace provisioned before bases
    were kept); it is called at most once, and only when a base is missing. ``dropped`` is
    whether the file held texts not trusted (REL-11), so that it is written again without them.
    """

    texts: dict[str, str]
    fallback: Callable[[], Iterable[RenderedFile]] | None = None
    _rendered_again: dict[str, bytes] | None = None
    dropped: bool = False

    def text(self, digest: str) -> bytes | None:
        """The text whose digest is ``digest``, or None when neither kept nor re-rendered."""
        if digest in self.texts:
            return self.texts[digest].encode("utf-8")
        if self.fallback is None:
            return None
        if self._rendered_again is None:
            self._rendered_again = {}
            # The answers come from the workspace's manifest, which the agent can edit;
            # whatever stops their render (Copier refuses a value, a template error), there
            # is no base: the file is reported as a conflict and left untouched.
            with suppress(Exception):
                self._rendered_again = {f.digest: f.content for f in self.fallback()}
        return self._rendered_again.get(digest)

    def record(self, keep: Iterable[str], rendered: Iterable[RenderedFile]) -> dict[str, str]:
        """The texts to keep: those of ``keep`` still known, and every text of ``rendered``."""
        texts: dict[str, str] = {}
        for digest in keep:
            found = self.text(digest)
            if found is not None:
                _add_text(texts, digest, found)
        for new in rendered:
            _add_text(texts, new.digest, new.content)
        return texts


def _add_text(texts: dict[str, str], digest: str, content: bytes) -> None:
    with suppress(UnicodeDecodeError):  # not text: never merged, so no base is needed
        texts[digest] = content.decode("utf-8")


def read_bases(
    root: WorkspaceRoot, fallback: Callable[[], Iterable[RenderedFile]] | None = None
) -> Bases:
    """The workspace's kept bases; a missing file is no bases.

    Without a base an edited file is reported as a conflict rather than merged. A text whose
    digest is not the one it is kept under is not trusted (REL-11); a file that is not what the
    package writes raises ``RecordDamaged`` (REL-12).
    """
    document = read_record(root, BASES_RECORD)
    if document is None:
        return Bases({}, fallback)
    kept = string_map(root, BASES_RECORD, document, "texts")
    texts = {digest: text for digest, text in kept.items() if _digest_of(text) == digest}
    return Bases(texts, fallback, dropped=len(texts) != len(kept))


def _digest_of(text: str) -> str | None:
    """The digest of the bytes ``text`` was kept from (``RenderedFile.digest``'s form)."""
    try:
        return RenderedFile("", text.encode("utf-8"), False).digest
    except UnicodeEncodeError:  # a lone surrogate: never a text the package kept
        return None


def write_bases(root: WorkspaceRoot, bases: Bases, texts: Mapping[str, str]) -> None:
    """Replace ``.nerve/bases.json`` with ``texts`` (atomic), unless it already holds them."""
    if dict(texts) == bases.texts and not bases.dropped:
        return
    document = {"format": BASES_FORMAT, "texts": dict(texts)}
    content = (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8")
    root.write(BASES_PATH, content, BASES_MODE)
    bases.texts = dict(texts)
    bases.dropped = False
