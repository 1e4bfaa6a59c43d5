"""Every requirement ID the repository cites means something here (DOC-2).

The code, the tests and the docs cite requirement IDs (``SWEEP-14``, ``CONF-7``) to say what
they implement or hold. docs/requirements.md defines each one in a line; these tests read every
file that can cite one and fail naming each ID cited but not defined there, each ID defined
twice, and each defined ID from no known area.

Only the areas below are requirement IDs: ``UTF-8``, ``SHA-256``, ``RFC-3339`` or ``HTTP-503``
have the same shape and are not.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO_ROOT / "docs" / "requirements.md"

# The areas requirement IDs belong to, each the prefix of its IDs (BACK-1, TXT-3, …).
AREAS = (
    "BACK",
    "TXT",
    "CONF",
    "INIT",
    "GOLD",
    "GW",
    "LOOM",
    "REC",
    "SWEEP",
    "IMP",
    "CON",
    "DOC",
    "NERVE",
    "MIG",
    "OPS",
    "REL",
    "FLEET",
)
# An area, a dash and a number, standing on its own: `GW-5's` and `CONF-1…CONF-7` cite, while
# `X-GW-5` and `GW-5a` do not.
CITED_ID = re.compile(rf"(?<![\w-])(?:{'|'.join(AREAS)})-\d+(?!\w)")
# A line of docs/requirements.md that defines an ID: `- **SWEEP-14** Sessions are swept …`.
LISTED_ID = re.compile(r"^- \*\*(?P<id>[A-Z]+-\d+)\*\* \S", re.MULTILINE)
# Where an ID may be cited, relative to the repository root.
CITING_PLACES = (
    "provisioner",
    "tests",
    "docs",
    "templates",
    "skills",
    "scripts",
    "benchmarks",
    "testbed",
    "README.md",
    "pyproject.toml",
    ".ci",
)


def citing_files() -> list[Path]:
    """Every text file under the citing places; caches and binary files (images) are skipped."""
    found = []
    for place in CITING_PLACES:
        root = REPO_ROOT / place
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in candidates:
            if path.is_file() and "__pycache__" not in path.parts:
                found.append(path)
    return found


def text_of(path: Path) -> str | None:
    """The file's text, or None for a file that is not UTF-8 text."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def cited_ids(text: str) -> list[str]:
    """The requirement IDs ``text`` cites, in order, repeats included."""
    return CITED_ID.findall(text)


def citations() -> dict[str, str]:
    """Each ID the repository cites, with the first place citing it (``path:line``)."""
    first_place: dict[str, str] = {}
    for path in citing_files():
        text = text_of(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            for requirement in cited_ids(line):
                place = f"{path.relative_to(REPO_ROOT).as_posix()}:{number}"
                first_place.setdefault(requirement, place)
    return first_place


def listed_ids() -> list[str]:
    """The IDs docs/requirements.md defines, in the page's order, repeats included."""
    return LISTED_ID.findall(REQUIREMENTS.read_text(encoding="utf-8"))


class TestEveryCitedIdIsDefined:
    def test_every_id_the_repository_cites_is_listed_on_the_requirements_page(self) -> None:
        listed = set(listed_ids())
        missing = {
            requirement: place
            for requirement, place in sorted(citations().items())
            if requirement not in listed
        }
        assert not missing, "cited but not in docs/requirements.md: " + ", ".join(
            f"{requirement} ({place})" for requirement, place in missing.items()
        )

    def test_no_id_is_listed_twice(self) -> None:
        twice = sorted(i for i, count in Counter(listed_ids()).items() if count > 1)
        assert not twice, f"docs/requirements.md lists {twice} more than once"

    def test_every_listed_id_belongs_to_a_known_area(self) -> None:
        strangers = [i for i in listed_ids() if i.split("-")[0] not in AREAS]
        assert not strangers, f"docs/requirements.md lists {strangers}, of no known area"

    def test_every_area_has_ids_on_the_page(self) -> None:
        listed_areas = {i.split("-")[0] for i in listed_ids()}
        assert listed_areas == set(AREAS)

    def test_each_group_links_to_a_page_that_explains_it(self) -> None:
        text = REQUIREMENTS.read_text(encoding="utf-8")
        groups = text.split("\n## ")[1:]
        assert groups, "docs/requirements.md has no groups"
        for group in groups:
            heading = group.splitlines()[0]
            assert re.search(r"\]\([^)]+\.md(?:#[^)]*)?\)", group), (
                f"the group {heading!r} links to no page"
            )


class TestReadingCitations:
    def test_ids_in_ranges_lists_and_possessives_are_read(self) -> None:
        text = "held to CONF-1…CONF-7 and (GW-5, SWEEP-3/4); SWEEP-13's exit status; NERVE-12."
        assert cited_ids(text) == [
            "CONF-1",
            "CONF-7",
            "GW-5",
            "SWEEP-3",
            "SWEEP-13",
            "NERVE-12",
        ]

    def test_things_shaped_like_ids_are_not_requirements(self) -> None:
        text = "UTF-8, utf-8, SHA-256, RFC-3339, HTTP-503, ISO-8601, X-GW-5, GW-5a, CONFIG-2"
        assert cited_ids(text) == []

    def test_an_area_that_is_the_start_of_another_is_told_apart(self) -> None:
        assert cited_ids("CON-1 and CONF-1, REC-2 and REL-2") == [
            "CON-1",
            "CONF-1",
            "REC-2",
            "REL-2",
        ]
