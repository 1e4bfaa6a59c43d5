"""A hostile source never breaks the sweep, and every good message reaches Loom (SWEEP-12).

Each example builds a few sessions of good messages with bad rows of every kind mixed in
(``hostile_source.BAD_ROWS``), maybe one session whose reads fail, and a Loom that checks each
call against the contract's schema and takes batches whole, in part, not at all, or answers
"not now". It sweeps until a sweep sends nothing. Then:

* nothing escaped ``run_once``, and the contract refused no call;
* every good message was taken exactly once, exactly as the source had it (role, content,
  time), in order, and none of a failing session;
* every audit row is a refused bad row, none twice, and no text of any row is in an audit row
  or a report.

Pages are shortened to a few rows so that windows span pages. A run of rows with no usable id
as long as a page is left out: the source can only be asked for rows after an id, so it cannot
be read past (the report names that session). ``NERVE_PROPERTY_EXAMPLES`` sets the number of
examples (a few by default).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from unittest import mock

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep import window as window_module
from provisioner.runtime.sweep.sweeper import Sweeper
from testbed.loom import FakeLoom
from tests.support.clock import fixed_clock

from .hostile_source import (
    BAD_ROWS,
    CANARY,
    NOT_A_LIST,
    USABLE_ID,
    HostileSource,
)

# More examples on demand, as elsewhere in the suite: NERVE_PROPERTY_EXAMPLES=500
EXAMPLES = int(os.environ.get("NERVE_PROPERTY_EXAMPLES", "20"))
PAGE = 4  # rows per read in these examples, so that windows span pages
SWEEPS_MAX = 60  # a sweep that sends nothing comes well before this
ZONES = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]

rfc3339_times = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.sampled_from(ZONES)
).map(lambda moment: moment.isoformat().replace("+00:00", "Z"))
good_rows = st.tuples(
    st.just("good"), st.sampled_from(sorted(MESSAGE_ROLES)), st.text(max_size=40), rfc3339_times
)
bad_rows = st.tuples(st.just("bad"), st.sampled_from(sorted(BAD_ROWS)))
sessions = st.lists(st.lists(st.one_of(good_rows, bad_rows), max_size=30), min_size=1, max_size=3)
answers = st.lists(st.sampled_from(["all", "one", "none", "not now"]), max_size=12)
failures = st.sampled_from([None, OSError("disk gone"), NOT_A_LIST])


def has_usable_id(row: tuple) -> bool:
    return row[0] == "good" or row[1] in USABLE_ID


def longest_run_without_usable_id(rows: list[tuple]) -> int:
    longest = run = 0
    for row in rows:
        run = 0 if has_usable_id(row) else run + 1
        longest = max(longest, run)
    return longest


def build(drawn: list[list[tuple]], failure: object) -> HostileSource:
    """The source: sessions ``s0``…, and a session ``f`` whose reads fail when ``failure``."""
    source = HostileSource()
    for number, rows in enumerate(drawn):
        for entry in rows:
            if entry[0] == "good":
                _, role, text, created_at = entry
                content = f"{text} {CANARY}-{source.ordinal + 1}"
                source.add_good(f"s{number}", content, role=role, created_at=created_at)
            else:
                source.add_bad(f"s{number}", entry[1])
    if failure is not None:
        source.add_good("f", f"{CANARY} never read")
        source.add_bad("f", "no content")
        source.failures["f"] = failure
    return source


async def sweep_until_idle(source: HostileSource, loom: FakeLoom, state: StateStore) -> list[dict]:
    """Sweep until a sweep sends nothing: every window is empty of what can go."""
    sweeper = Sweeper(loom, source, state, clock=fixed_clock)
    reports = []
    for _ in range(SWEEPS_MAX):
        report = await sweeper.run_once()
        reports.append(report.as_dict())
        if report.batches_sent == 0:
            return reports
    raise AssertionError(f"still sending after {SWEEPS_MAX} sweeps")


def check_loom_took_every_good_message_once_as_it_was(
    source: HostileSource, loom: FakeLoom
) -> None:
    assert loom.refusals == []
    for session_id in source.rows:
        good = source.good(session_id) if session_id != "f" else []
        assert loom.taken_ids(session_id) == [message.id for message in good]
        wires = [t.wire for t in loom.taken_items if t.session_id == session_id]
        assert wires == [
            {"role": m.role, "content": m.content, "created_at": m.created_at} for m in good
        ]


def check_the_audit(source: HostileSource, state: StateStore, reports: list[dict]) -> None:
    rows = state.audit()
    good_ids = {message.id for session_id in source.rows for message in source.good(session_id)}
    assert all(row["kind"] == "skipped" for row in rows)
    assert all(str(row["detail"]).startswith("refused: ") for row in rows)
    assert not {row["message_id"] for row in rows} & good_ids
    bad = [r for rows_of in source.rows.values() for r in rows_of if r.good is None]
    assert len(rows) <= len(bad)
    placed = {r.ordinal for r in bad if r.kind in USABLE_ID}
    seen = Counter(row["message_id"] for row in rows if row["message_id"] in placed)
    assert all(count == 1 for count in seen.values())
    assert CANARY not in json.dumps([rows, reports])


class TestHostileSourceProperty:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(drawn=sessions, failure=failures, plan=answers)
    def test_nothing_escapes_and_every_good_message_reaches_loom_once_as_sent(
        self, drawn: list[list[tuple]], failure: object, plan: list[str]
    ) -> None:
        """SWEEP-12 (with SWEEP-2, SWEEP-7, SWEEP-9): a mix of good messages and bad rows of
        every kind, answered in part or "not now"; see the module docstring."""
        assume(all(longest_run_without_usable_id(rows) < PAGE for rows in drawn))
        source, loom = build(drawn, failure), FakeLoom(check_contract=True, plays=list(plan))
        with (
            StateStore(":memory:") as state,
            mock.patch.object(window_module, "READ_PAGE_MESSAGES", PAGE),
        ):
            reports = asyncio.run(sweep_until_idle(source, loom, state))
            check_loom_took_every_good_message_once_as_it_was(source, loom)
            check_the_audit(source, state, reports)
            for session_id in source.rows:
                good = source.good(session_id)
                if good and session_id != "f":
                    assert state.watermark(session_id) >= good[-1].id
        if failure is not None:
            kind = "SourceFailed(TypeError)" if failure is NOT_A_LIST else "SourceFailed(OSError)"
            assert all({"session_id": "f", "kind": kind} in r["errors"] for r in reports)
