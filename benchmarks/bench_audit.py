"""Benchmark of the reads of the state file's audit log on a long-lived instance (SWEEP-13, MIG-2).

    python benchmarks/bench_audit.py [--batches 1000000] [--sessions 500] [--runs 5] [--json]

The sweep keeps a row per batch for good (SWEEP-13), so after a year an instance's audit log
holds about a million rows of kind ``batch`` beside a few hundred of the kinds that are read
back: the start-point ledger (``left_to_memu``, MIG-2), the rows ``nerve memory status``
lists, one kind since a time (doctor). This builds such a state file twice, the ledger's rows
first and the batches after (the usual order), then reads:

* ``read_ledger``: the sweep's start-point ledger, once per sweep;
* ``audit(limit=20)``: what ``nerve memory status`` lists by default;
* ``audit(kinds=(left_to_memu,))``: one kind, every row.

and prints the median of ``--runs`` for each, with and without the index on
``sweep_audit (kind, recorded_at)`` (schema step 7; dropped for the "without" figures).

Target: each read under 10 ms with the index at a million batch rows.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.runtime.state import (  # noqa: E402
    AUDIT_BATCH,
    AUDIT_LEFT_TO_MEMU,
    StateStore,
)
from provisioner.runtime.sweep.source import read_ledger  # noqa: E402

INDEX = "sweep_audit_by_kind"
TARGET_MS = 10.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as scratch:
        for indexed in (False, True):
            path = Path(scratch) / f"state-{indexed}.sqlite3"
            build(path, args.batches, args.sessions, indexed)
            store = StateStore(path)
            try:
                for name, read in reads_of(store).items():
                    median_ms = measure(read, args.runs)
                    result = {"read": name, "index": indexed, "median_ms": median_ms}
                    results.append(result)
                    if not args.json:
                        where = "with the index" if indexed else "without it"
                        print(f"{name:18} {where:15} {median_ms:8.2f} ms", flush=True)
            finally:
                store.close()
    if args.json:
        print(json.dumps(results, indent=2))
    indexed_ok = all(r["median_ms"] < TARGET_MS for r in results if r["index"])
    return 0 if indexed_ok else 1


def reads_of(store: StateStore) -> dict[str, Callable[[], object]]:
    """The reads timed, by name."""
    return {
        "read_ledger": lambda: read_ledger(store),
        "audit(limit=20)": lambda: store.audit(limit=20),
        "audit(one kind)": lambda: store.audit(kinds=(AUDIT_LEFT_TO_MEMU,)),
    }


def build(path: Path, batches: int, sessions: int, indexed: bool) -> None:
    """A state file at the current schema with the ledger's rows, then ``batches`` batch rows."""
    StateStore(path).close()
    database = sqlite3.connect(path)
    try:
        insert = (
            "INSERT INTO sweep_audit (kind, session_id, message_id, recorded_at, detail)"
            " VALUES (?, ?, ?, ?, ?)"
        )
        database.executemany(
            insert,
            ((AUDIT_LEFT_TO_MEMU, f"s{n}", 5, 0.0, "messages=5") for n in range(sessions)),
        )
        database.executemany(
            insert,
            ((AUDIT_BATCH, f"s{n % sessions}", n, float(n), "10") for n in range(batches)),
        )
        if not indexed:
            database.execute(f"DROP INDEX {INDEX}")
        database.commit()
    finally:
        database.close()


def measure(read: Callable[[], object], runs: int) -> float:
    """The median time of ``runs`` calls of ``read``, in milliseconds, after one warm-up."""
    read()
    spent = []
    for _run in range(runs):
        started = time.perf_counter()
        read()
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent)


if __name__ == "__main__":
    raise SystemExit(main())
