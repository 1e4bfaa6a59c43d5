"""What a room's docstring says it imports, and is imported by, is what its modules do.

Each room of ``provisioner/`` (a folder, or one of the shared modules beside them such as
``errors`` or ``files``) opens with a docstring; where that docstring makes the claim, it makes it
in one sentence a reader and this test read alike::

    Imports `config`, `runtime` and `workspace`; imported by `cli`.

Each name in backticks is a room; ``Imports no room`` says it imports none, and the "imported
by" half may be left out. Both halves are the whole truth, not a part of it: the rooms any module
of the room imports (at module level, in a function or for type checking alone, as
``tests/test_layout.py`` reads them), and the rooms any of whose modules import it.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests import test_layout as layout
from tests.test_layout import MODULES

ROOT_PACKAGE = "provisioner"
NOT_ROOMS = frozenset({"__main__"})  # ``python -m provisioner``: the way in, not a room
CLAIM = re.compile(
    r"(?:^|(?<=[.:]\s))Imports (?P<imports>[^;.]*)(?:; imported by (?P<by>[^.]*))?\."
)
NO_ROOM = "no room"
ROOM_NAME = re.compile(r"(?<!`)`([A-Za-z_][A-Za-z0-9_]*)`(?!`)")


def room_of(module: str) -> str | None:
    """The room a module of the package lives in, by its short name (``cli``, ``runtime``)."""
    if module == ROOT_PACKAGE or module.split(".")[1] in NOT_ROOMS:
        return None
    return layout.room_of(module).removeprefix(f"{ROOT_PACKAGE}.")


ROOMS = sorted({room for module in MODULES if (room := room_of(module)) is not None})


def rooms_imported_by(room: str) -> set[str]:
    """The other rooms any module of ``room`` imports."""
    found = layout.rooms_imported_by(f"{ROOT_PACKAGE}.{room}")
    return {name for target in found if (name := room_of(target)) is not None}


def rooms_importing(room: str) -> set[str]:
    """The other rooms any of whose modules import ``room``."""
    return {other for other in ROOMS if other != room and room in rooms_imported_by(other)}


def docstring_of(room: str) -> str:
    module = f"{ROOT_PACKAGE}.{room}"
    return ast.get_docstring(ast.parse(MODULES[module].read_text(encoding="utf-8"))) or ""


def named_rooms(clause: str) -> set[str]:
    """The rooms a claim's half names: every name in backticks, or none for ``no room``."""
    if clause.strip() == NO_ROOM:
        return set()
    names = set(ROOM_NAME.findall(clause))
    assert names, f"{clause!r}: expected rooms in backticks, or {NO_ROOM!r}"
    return names


def claims() -> list[tuple[str, str]]:
    """Every room whose docstring makes the claim, with the claim."""
    found = []
    for room in ROOMS:
        for match in CLAIM.finditer(" ".join(docstring_of(room).split())):
            found.append((room, match.group(0)))
    return found


class TestTheRoomsClaims:
    def test_every_folder_room_makes_the_claim(self) -> None:
        """A room is a folder with a docstring; each says what it imports, so none is unsaid."""
        folders = {
            room for room in ROOMS if MODULES[f"{ROOT_PACKAGE}.{room}"].name == "__init__.py"
        }
        claimed = {room for room, _claim in claims()}
        assert sorted(folders - claimed) == []

    def test_each_room_claims_once(self) -> None:
        rooms = [room for room, _claim in claims()]
        assert sorted(room for room in set(rooms) if rooms.count(room) > 1) == []

    @pytest.mark.parametrize(("room", "claim"), claims(), ids=[room for room, _ in claims()])
    def test_the_claim_is_what_the_imports_are(self, room: str, claim: str) -> None:
        match = CLAIM.match(claim)
        assert match is not None
        named = named_rooms(match.group("imports"))
        assert named <= set(ROOMS), f"{room}: {sorted(named - set(ROOMS))} are not rooms"
        assert sorted(named) == sorted(rooms_imported_by(room)), f"{room} imports"
        if match.group("by") is not None:
            by = named_rooms(match.group("by"))
            assert by <= set(ROOMS), f"{room}: {sorted(by - set(ROOMS))} are not rooms"
            assert sorted(by) == sorted(rooms_importing(room)), f"{room} is imported by"


class TestTheReader:
    def test_it_reads_a_claim_with_both_halves(self) -> None:
        text = "A room. Imports `config` and `runtime`; imported by `cli`. More."
        [match] = CLAIM.finditer(text)
        assert named_rooms(match.group("imports")) == {"config", "runtime"}
        assert named_rooms(match.group("by")) == {"cli"}

    def test_it_reads_no_room_and_a_claim_without_its_second_half(self) -> None:
        [match] = CLAIM.finditer("The floor. Imports no room.")
        assert named_rooms(match.group("imports")) == set()
        assert match.group("by") is None

    def test_it_finds_the_real_imports_of_a_room(self) -> None:
        """The fleet runs migrations, so the reader must see the fleet import it."""
        assert "migration" in rooms_imported_by("fleet")
        assert "fleet" in rooms_importing("migration")
