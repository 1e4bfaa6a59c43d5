"""A transcript source that yields whatever it is given.

The seams of the SWEEP-12 tests. ``HostileSource`` keeps each session's rows in order and
pages by a hidden ordinal, the way a store pages by its own key: a row whose visible id is
broken still sits where it was stored. ``BAD_ROWS`` names every kind of bad row a source may
yield; each carries a canary in whatever text it has, so a test can see that none reaches an
audit row, a report or a log. The tests hold what reaches Loom to its params schema with
``FakeLoom(check_contract=True)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

from provisioner.runtime.transcripts import Message

GOOD_TIME = "2026-11-30T10:00:00Z"
CANARY = "CANARY"  # in every text a row carries; never to be seen outside Loom


class PosingAsText:
    """An object whose ``__class__`` claims ``str``: ``isinstance`` is fooled, ``type`` is not."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __str__(self) -> str:
        return f"{CANARY} posing as text"


class RaisingContent:
    """A row whose ``content`` getter raises, as a lazy store's might."""

    def __init__(self, ordinal: int) -> None:
        self.id = ordinal
        self.role = "user"
        self.created_at = GOOD_TIME

    @property
    def content(self) -> str:
        raise RuntimeError(f"{CANARY} the store went away")


def row(ordinal: int, **changes: object) -> SimpleNamespace:
    """A message-like row, good but for ``changes``."""
    fields: dict[str, object] = {
        "id": ordinal,
        "role": "user",
        "content": f"{CANARY}-{ordinal} a bad row",
        "created_at": GOOD_TIME,
    }
    fields.update(changes)
    return SimpleNamespace(**fields)


# Each kind of bad row, made from its ordinal. Those in USABLE_ID keep their ordinal as id.
BAD_ROWS: dict[str, Callable[[int], object]] = {
    "no content": lambda n: Message(n, "user", None, GOOD_TIME),  # type: ignore[arg-type]
    "content a number": lambda n: row(n, content=42),
    "content bytes": lambda n: row(n, content=f"{CANARY} bytes".encode()),
    "content a list": lambda n: row(n, content=[f"{CANARY} in a list"]),
    "content posing as text": lambda n: row(n, content=PosingAsText()),
    "content a lone surrogate": lambda n: row(n, content=f"{CANARY} \ud800"),
    "content raises": RaisingContent,
    "no content attribute": lambda n: SimpleNamespace(id=n, role="user", created_at=GOOD_TIME),
    "unknown role": lambda n: row(n, role="narrator"),
    "role that is text": lambda n: row(n, role=f"{CANARY} Dear diary, today I"),
    "role none": lambda n: row(n, role=None),
    "role a number": lambda n: row(n, role=3),
    "time not a time": lambda n: row(n, created_at=f"{CANARY} yesterday"),
    "time none": lambda n: row(n, created_at=None),
    "time impossible": lambda n: row(n, created_at="2026-02-30T10:00:00Z"),
    "time a number": lambda n: row(n, created_at=1_764_496_800),
    "id text": lambda n: row(n, id=str(n)),
    "id bool": lambda n: row(n, id=True),
    "id float": lambda n: row(n, id=float(n)),
    "id too big": lambda n: row(n, id=2**64),
    "id zero": lambda n: row(n, id=0),
    "id negative": lambda n: row(n, id=-n),
    "none": lambda n: None,
    "a bare string": lambda n: f"{CANARY} a bare string",
    "a dict": lambda n: {"id": n, "role": "user", "content": CANARY, "created_at": GOOD_TIME},
}
USABLE_ID = frozenset(
    kind
    for kind in BAD_ROWS
    if kind.startswith(("content", "no content", "unknown role", "role", "time"))
)


@dataclass
class Row:
    """One stored row: where it sits, what the source yields, and the message if it is good."""

    ordinal: int
    raw: object
    good: Message | None
    kind: str = "good"  # or the kind of bad row, a key of ``BAD_ROWS``


@dataclass
class HostileSource:
    """A ``TranscriptSource`` yielding rows as given; ``failures`` make a session's reads fail.

    A failure is an exception to raise, or ``NOT_A_LIST`` to answer ``None`` instead of a page.
    """

    rows: dict[str, list[Row]] = field(default_factory=dict)
    failures: dict[str, object] = field(default_factory=dict)
    ordinal: int = 0

    def add_good(
        self, session_id: str, content: str, *, role: str = "user", created_at: str = GOOD_TIME
    ) -> Message:
        self.ordinal += 1
        message = Message(self.ordinal, role, content, created_at)
        self.rows.setdefault(session_id, []).append(Row(self.ordinal, message, message))
        return message

    def add_bad(self, session_id: str, kind: str) -> int:
        """A bad row of ``kind`` (see ``BAD_ROWS``); returns where it sits."""
        return self.add_raw(session_id, BAD_ROWS[kind], kind=kind)

    def add_raw(self, session_id: str, make: Callable[[int], object], *, kind: str = "raw") -> int:
        """A bad row made by ``make`` from where it sits; returns where it sits."""
        self.ordinal += 1
        made = Row(self.ordinal, make(self.ordinal), None, kind)
        self.rows.setdefault(session_id, []).append(made)
        return self.ordinal

    def good(self, session_id: str) -> list[Message]:
        return [r.good for r in self.rows.get(session_id, []) if r.good is not None]

    def sessions(self) -> list[str]:
        return list(self.rows)

    def messages_after(self, session_id: str, after_id: int, limit: int) -> list[object] | None:
        failure = self.failures.get(session_id)
        if failure is NOT_A_LIST:
            return None
        if isinstance(failure, BaseException):
            raise failure
        return [r.raw for r in self.rows.get(session_id, []) if r.ordinal > after_id][:limit]


NOT_A_LIST = object()
