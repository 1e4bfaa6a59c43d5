"""Benchmark of a sweep page read from Nerve's nerve.db (NERVE-2).

    python benchmarks/bench_nerve_db.py [--messages 50000] [--others 4] [--runs 15] [--json]

Nerve indexes its messages by ``(session_id, created_at)`` and has no index on
``(session_id, id)``, while the sweep pages by id. This builds Nerve-shaped databases (the
``testbed/nerve_db.py`` schema the tests use too) holding one session of ``--messages``
messages, in three layouts:

* ``alone``: the session is the whole table;
* ``among others``: every message of the session is followed by ``--others`` messages of other
  sessions, and 5,000 more of theirs come after its last (the session has gone quiet while
  others talk on);
* ``among others + index``: the same, with the index on ``messages (session_id, id)`` that
  Nerve could add.

For each layout and watermark (the session's start, its middle, ten messages before its end,
its end) it times ``NerveTranscripts.messages_after(session, watermark, 25)`` — one page of
the sweep (``READ_PAGE_MESSAGES``) — on a reader that has read nothing ahead (median of
``--runs``), a whole window as the sweep reads it (pages of 25 until 100 messages), and reading
the whole session from its start in pages of 25. Doctor's ``loom.sweep.nerve_db`` line warns
past ``provisioner.doctor.sweep.NERVE_DB_LARGE_SESSION`` messages in one session without the
index (docs/sweep.md says why).

There is no target: the figures say what a page costs, and what the index would save.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.runtime.nerve_db.transcripts import NerveTranscripts  # noqa: E402
from testbed.nerve_db import NerveDb  # noqa: E402

SESSION = "big-session-0000-0000-0000-000000000000"
PAGE = 25  # the sweep's READ_PAGE_MESSAGES
WINDOW = 100  # the sweep's waiting batch (WAITING_MAX_MESSAGES)
QUIET_TAIL = 5_000  # other sessions' messages after the big session's last
TEXT = "the user said the staging deploy runs every {n} minutes and asked to be told on failure"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--others", type=int, default=4)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-nerve-db-") as scratch:
        layouts = (("alone", 0, False), ("among others", args.others, False))
        layouts += (("among others + index", args.others, True),)
        for name, others, index in layouts:
            path = Path(scratch) / f"{name.replace(' ', '-')}.db"
            total = build(path, args.messages, others, index)
            result = measure(path, args.messages, args.runs)
            result.update(layout=name, table_rows=total)
            results.append(result)
            if not args.json:
                print(describe(result), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


def build(path: Path, messages: int, others: int, index: bool) -> int:
    """A Nerve-shaped database with the big session laid out as asked; its row count."""
    NerveDb(path, session_id_index=index).close()
    database = sqlite3.connect(path, isolation_level=None)
    database.execute("BEGIN")
    database.execute("INSERT INTO sessions (id) VALUES (?)", (SESSION,))
    for other in range(max(others, 1)):
        database.execute("INSERT INTO sessions (id) VALUES (?)", (f"other-{other}",))
    rows = []
    for n in range(messages):
        day, clock = 1 + n // 86_400 % 28, f"{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}"
        when = f"2026-11-{day:02d} {clock}"
        rows.append((SESSION, "user" if n % 2 == 0 else "assistant", TEXT.format(n=n), when))
        rows.extend((f"other-{k}", "user", TEXT.format(n=-n), when) for k in range(others))
    rows.extend((f"other-{k % max(others, 1)}", "user", "later", "2026-12-01 00:00:00")
                for k in range(QUIET_TAIL if others else 0))  # fmt: skip
    database.executemany(
        "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)", rows
    )
    database.execute("COMMIT")
    database.close()
    return len(rows)


def measure(path: Path, messages: int, runs: int) -> dict[str, object]:
    with NerveTranscripts(path) as source:
        source.sessions()
        ids = [m.id for m in _read_all(source)]
        watermarks = {"start": 0, "middle": ids[messages // 2], "near end": ids[-11]}
        watermarks["end"] = ids[-1]
        page_ms = {}
        window_ms = {}
        for name, watermark in watermarks.items():
            page_ms[name] = _median_ms(runs, lambda w=watermark: _page(source, w))
            window_ms[name] = _median_ms(runs, lambda w=watermark: _window(source, w))
        started = time.perf_counter()
        source.sessions()
        count = len(_read_all(source))
        whole_s = time.perf_counter() - started
    assert count == messages
    return {"page_ms": page_ms, "window_ms": window_ms, "whole_session_s": round(whole_s, 2)}


def _read_all(source: NerveTranscripts) -> list:
    found, after = [], 0
    while page := source.messages_after(SESSION, after, PAGE):
        found.extend(page)
        after = page[-1].id
    return found


def _page(source: NerveTranscripts, watermark: int) -> None:
    source.sessions()  # forget what was read ahead: the first page of a sweep
    source.messages_after(SESSION, watermark, PAGE)


def _window(source: NerveTranscripts, watermark: int) -> None:
    source.sessions()
    read, after = 0, watermark
    while read < WINDOW and (page := source.messages_after(SESSION, after, PAGE)):
        read += len(page)
        after = page[-1].id


def _median_ms(runs: int, work) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def describe(result: dict[str, object]) -> str:
    pages = result["page_ms"]
    windows = result["window_ms"]
    assert isinstance(pages, dict) and isinstance(windows, dict)
    cells = ", ".join(f"{name} {pages[name]} ms / {windows[name]} ms" for name in pages)
    return (
        f"{result['layout']} ({result['table_rows']} rows): page / window of 100 at {cells}; "
        f"whole session {result['whole_session_s']} s"
    )


if __name__ == "__main__":
    raise SystemExit(main())
