"""A transcript source that yields whatever it is given, and a Loom that checks the contract.

The seams of the SWEEP-12 tests. ``HostileSource`` keeps each session's rows in order and
pages by a hidden ordinal, the way a store pages by its own key: a row whose visible id is
broken still sits where it was stored. ``BAD_ROWS`` names every kind of bad row a source may
yield; each carries a canary in whatever text it has, so a test can see that none reaches an
audit row, a report or a log. ``ContractLoom`` refuses what Loom's params schema refuses
(``date-time`` format included), as the gateway does with -32602, and records every message
it took as it came on the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import jsonschema

from provisioner.devgateway.contract import served_tools
from provisioner.runtime.gateway.errors import BrokenAnswer, MayPass
from provisioner.runtime.loom.answers import extraction_arguments
from provisioner.runtime.loom.types import Extracted
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


@dataclass
class Taken:
    """One message Loom took: its session, the id the sweep had for it, and the wire item."""

    session_id: str
    message_id: int
    wire: dict[str, object]


@dataclass
class ContractLoom:
    """Loom behind the gateway, as far as the contract goes (SWEEP-3, CON-2).

    Arguments are built by the runtime's own ``extraction_arguments`` and checked against the
    op's params schema from the contract fixture, ``date-time`` format included: a call the
    schema refuses is recorded in ``refusals`` and fails as the gateway's -32602 does
    (``BrokenAnswer``). ``answers`` plays per call: ``"all"`` (the default once it runs
    out), ``"one"`` (only the first message taken), ``"none"`` or ``"not now"``.
    """

    answers: list[str] = field(default_factory=list)
    taken: list[Taken] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        schema = served_tools()["loom_memory_set_from_messages"].params_schema
        checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
        self._validator = jsonschema.Draft202012Validator(schema, format_checker=checker)

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        arguments = extraction_arguments(
            messages, context, session_id=session_id, defer=defer, namespace=None
        )
        problems = [error.message for error in self._validator.iter_errors(arguments)]
        self.calls += 1
        if problems:
            self.refusals.extend(problems)
            raise BrokenAnswer("-32602: invalid params")
        answer = self.answers.pop(0) if self.answers else "all"
        if answer == "not now":
            raise MayPass("upstream unavailable")
        accepted = {"all": len(messages), "one": 1, "none": 0}[answer]
        for message, wire in list(zip(messages, arguments["messages"], strict=True))[:accepted]:
            self.taken.append(Taken(session_id, message.id, wire))
        return Extracted(accepted=accepted)

    def taken_ids(self, session_id: str) -> list[int]:
        return [t.message_id for t in self.taken if t.session_id == session_id]
