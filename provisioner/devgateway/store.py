"""The Loom stand-in's memory: one SQLite database, memories kept per namespace.

It answers the ops the dev gateway serves the way contracts/loom-ops.md describes Loom's
answers: ``memory.set_from_messages`` stores one memory per message, each with a verdict
(``duplicate`` when the namespace already holds the same text, else ``clear``);
``memory.set`` stores one memory under the caller's ``memory_key`` when it sends one, with its
kind, tags and dates (``duplicate`` when the key or the same text is there already, so a write
sent twice is one memory: what ``nerve memory migrate`` relies on, MIG-1);
``context.pack`` returns stored memories with ``&``, ``<`` and ``>`` written as entities, as
Loom writes pack text; ``search.query`` returns raw excerpts ranked by shared words, and
abstains when no memory shares a word with the query; ``namespace.summary`` names the org
``dev`` and the home namespace ``agent``.

A queued extraction (``defer: true``, SWEEP-4) is kept with its queue id and stores nothing
yet, as Loom's queue does. ``memory.extraction_status_mine`` moves each pending batch one step
per status call — ``queued``, then ``running``, then ``done`` (``queue_polls_before_done``
sets how many answers come before ``done``; 0 writes a batch when it is queued) — and a batch
is stored when it is done. A status answer may be forced per batch (the dev gateway's
``queue`` fault): ``failed`` stores nothing; ``memory.extraction_retry_mine`` puts a
failed batch back in the queue. Both ops leave out ids the caller did not queue in that
namespace, as Loom's caller-bound ops do (SWEEP-15). Every message an extraction stores —
waiting, or a queued batch once done — is also logged, duplicates included
(``extracted_texts``), so a test can tell a message written once from one written twice.

The database is a file under ``--data DIR`` (kept across restarts) or in memory. Calls come
from the server's event loop and, in tests, from the test's thread, so a lock guards it.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from provisioner.runtime.face import faults_named

DEV_ORG = "dev"  # the org the stand-in resolves for every caller
HOME_NAMESPACE = "agent"  # the caller's home namespace
SHARED_NAMESPACES = ("team",)  # namespaces the caller may read but not write
PACK_MAX_ITEMS = 20  # how many memories a startup pack holds at most
EXCERPT_MAX_CHARS = 400  # how much of a memory a search result carries
DATABASE_FILE = "loom-stand-in.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    memory_key TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    written_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_by_namespace ON memories (namespace, id);
CREATE INDEX IF NOT EXISTS memories_by_text ON memories (namespace, text);
CREATE TABLE IF NOT EXISTS extraction_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    texts TEXT NOT NULL,
    state TEXT NOT NULL,
    polls INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS extracted (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_details (
    memory_key TEXT PRIMARY KEY,
    kind TEXT,
    tags TEXT NOT NULL,
    created_at TEXT,
    updated_at TEXT,
    happened_at TEXT
);
"""
DETAILS = ("kind", "tags", "created_at", "updated_at", "happened_at")  # memory.set's extras
QUEUE_POLLS_BEFORE_DONE = 2  # our choice: "queued", then "running", then "done"
QUEUE_ID_PREFIX = "q-"
QUEUE_SEQ_MAX_DIGITS = 18  # our choice: past any row count, and int() stays cheap
PENDING = ("queued", "running")  # SWEEP-15: the states of a batch still in the queue
QueueState = Callable[[], str | None]  # a forced state for one pending batch, or None
_WORD = re.compile(r"[^\W_]{3,}")


class LoomStandIn:
    """Memories in SQLite per namespace, and the four lifecycle ops plus ``memory.set``."""

    def __init__(self, data_dir: Path | None = None) -> None:
        """Open (or create) the memories in ``data_dir``, or in memory without one.

        A file that cannot be used (damaged, busy, read-only, a full disk) raises
        ``FileFault`` naming it, with nothing left open (REL-4).
        """
        path = ":memory:"
        if data_dir is not None:
            data_dir.mkdir(parents=True, exist_ok=True)
            path = str(data_dir / DATABASE_FILE)
        self._lock = threading.Lock()
        with faults_named(path):
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            try:
                self._db.executescript(_SCHEMA)
            except BaseException:
                self._db.close()
                raise
        self.queue_polls_before_done = QUEUE_POLLS_BEFORE_DONE

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- what tests and the CLI use directly ---------------------------------------------------

    def remember(self, text: str, *, namespace: str = HOME_NAMESPACE) -> dict[str, str]:
        """Store ``text`` as a memory of ``namespace``; returns its key and verdict."""
        with self._lock:
            return self._store(namespace, text)

    def memory_texts(self, namespace: str = HOME_NAMESPACE) -> list[str]:
        """The stored texts of ``namespace``, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT text FROM memories WHERE namespace = ? ORDER BY id", (namespace,)
            ).fetchall()
        return [row[0] for row in rows]

    def memory_keys(self, namespace: str = HOME_NAMESPACE) -> list[str]:
        """The keys of ``namespace``'s memories, oldest first (one per memory stored)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT memory_key FROM memories WHERE namespace = ? ORDER BY id", (namespace,)
            ).fetchall()
        return [row[0] for row in rows]

    def extracted_texts(self, namespace: str = HOME_NAMESPACE) -> list[str]:
        """Every message text an extraction stored in ``namespace``, in order, duplicates kept."""
        with self._lock:
            rows = self._db.execute(
                "SELECT text FROM extracted WHERE namespace = ? ORDER BY id", (namespace,)
            ).fetchall()
        return [row[0] for row in rows]

    def queue_states(self) -> dict[str, str]:
        """Each queued batch's id and state, as the status op would answer without moving it."""
        with self._lock:
            rows = self._db.execute("SELECT seq, state FROM extraction_queue ORDER BY seq")
            return {f"{QUEUE_ID_PREFIX}{seq}": state for seq, state in rows.fetchall()}

    def memory(self, memory_key: str) -> dict[str, Any] | None:
        """One stored memory by key: its namespace, text, and what ``memory.set`` kept of it."""
        with self._lock:
            row = self._db.execute(
                "SELECT m.namespace, m.text, d.kind, d.tags, d.created_at, d.updated_at,"
                " d.happened_at FROM memories m LEFT JOIN memory_details d"
                " ON d.memory_key = m.memory_key WHERE m.memory_key = ?",
                (memory_key,),
            ).fetchone()
        if row is None:
            return None
        namespace, text, kind, tags, *dates = row
        found = {"namespace": namespace, "text": text, "kind": kind}
        found["tags"] = json.loads(tags) if tags else []
        found.update(zip(DETAILS[2:], dates, strict=True))
        return found

    # --- the ops ---------------------------------------------------------------------------------

    def answer(
        self, op: str, arguments: Mapping[str, Any], *, forced: QueueState | None = None
    ) -> dict[str, Any]:
        """The answer of ``op`` to ``arguments`` (already checked against its params schema).

        ``forced`` is asked once per pending batch a status call names: the state it gives
        (``queued``, ``running``, ``done``, ``failed``) replaces the batch's next step.
        """
        handlers = {
            "context.pack": self._context_pack,
            "search.query": self._search,
            "memory.set_from_messages": self._set_from_messages,
            "namespace.summary": self._summary,
            "memory.set": self._memory_set,
            "memory.extraction_status_mine": lambda args: self._status(args, forced),
            "memory.extraction_retry_mine": self._retry,
        }
        with self._lock:
            return handlers[op](arguments)

    def _context_pack(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        namespace = arguments.get("namespace", HOME_NAMESPACE)
        sections: dict[str, Any] = {}
        if "memories" in arguments.get("sections", ["memories"]):
            rows = self._db.execute(
                "SELECT memory_key, text FROM memories WHERE namespace = ?"
                " ORDER BY id DESC LIMIT ?",
                (namespace, PACK_MAX_ITEMS + 1),
            ).fetchall()
            items = [
                {"memory_key": key, "namespace": namespace, "text": html.escape(text, quote=False)}
                for key, text in rows[:PACK_MAX_ITEMS]
            ]
            sections["memories"] = {"items": items, "truncated": len(rows) > PACK_MAX_ITEMS}
        return {"mode": arguments["mode"], "namespace": namespace, "sections": sections}

    def _search(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        namespace = arguments.get("namespace", HOME_NAMESPACE)
        wanted = set(_WORD.findall(arguments["query"].lower()))
        rows = self._db.execute(
            "SELECT memory_key, text FROM memories WHERE namespace IN (?, ?)",
            (namespace, *SHARED_NAMESPACES),
        ).fetchall()
        scored = []
        for key, text in rows:
            shared = wanted & set(_WORD.findall(text.lower()))
            if shared:
                scored.append((len(shared) / len(wanted), key, text))
        scored.sort(key=lambda hit: (-hit[0], hit[1]))
        results = [
            {
                "memory_key": key,
                "namespace": namespace,
                "content_excerpt": text[:EXCERPT_MAX_CHARS],
                "score": round(score, 4),
            }
            for score, key, text in scored[: arguments.get("top_k", 10)]
        ]
        reason = None if results else "nothing relevant enough"
        return {"results": results, "abstained": not results, "abstain_reason": reason}

    def _set_from_messages(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        namespace = arguments.get("namespace", HOME_NAMESPACE)
        texts = [message["content"] for message in arguments["messages"]]
        if arguments.get("defer", False):
            at_once = self.queue_polls_before_done <= 0
            cursor = self._db.execute(
                "INSERT INTO extraction_queue (namespace, texts, state) VALUES (?, ?, ?)",
                (namespace, json.dumps(texts, ensure_ascii=False), "done" if at_once else "queued"),
            )
            if at_once:
                self._extract(namespace, texts)
            return {"accepted": len(texts), "queue_id": f"{QUEUE_ID_PREFIX}{cursor.lastrowid}"}
        return {"accepted": len(texts), "written": self._extract(namespace, texts)}

    def _extract(self, namespace: str, texts: list[str]) -> list[dict[str, str]]:
        """Store one memory per text, and log each text as extracted (duplicates too)."""
        self._db.executemany(
            "INSERT INTO extracted (namespace, text) VALUES (?, ?)",
            [(namespace, text) for text in texts],
        )
        return [self._store(namespace, text) for text in texts]

    def _status(self, arguments: Mapping[str, Any], forced: QueueState | None) -> dict[str, Any]:
        items = []
        for seq, namespace, texts, state, polls, attempts in self._caller_batches(arguments):
            if state in PENDING:
                polls += 1
                step = forced() if forced is not None else None
                if step is None:
                    done = polls > self.queue_polls_before_done
                    step = "done" if done else PENDING[min(polls - 1, len(PENDING) - 1)]
                if step == "done":
                    self._extract(namespace, json.loads(texts))
                state = step
                self._db.execute(
                    "UPDATE extraction_queue SET state = ?, polls = ? WHERE seq = ?",
                    (state, polls, seq),
                )
            error = "extraction failed" if state == "failed" else None
            queue_id = f"{QUEUE_ID_PREFIX}{seq}"
            items.append(
                {"queue_id": queue_id, "state": state, "attempts": attempts, "error": error}
            )
        return {"items": items}

    def _retry(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        items = []
        for seq, _namespace, _texts, state, _polls, _attempts in self._caller_batches(arguments):
            if state == "failed":
                state = "queued"
                self._db.execute(
                    "UPDATE extraction_queue SET state = 'queued', polls = 0,"
                    " attempts = attempts + 1 WHERE seq = ?",
                    (seq,),
                )
            items.append({"queue_id": f"{QUEUE_ID_PREFIX}{seq}", "state": state})
        return {"items": items}

    def _caller_batches(self, arguments: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """The batches the call names that the caller queued in its namespace, each once."""
        namespace = arguments.get("namespace", HOME_NAMESPACE)
        wanted = dict.fromkeys(_queue_seq(queue_id) for queue_id in arguments["queue_ids"])
        found = []
        for seq in wanted:
            if seq is None:
                continue
            row = self._db.execute(
                "SELECT seq, namespace, texts, state, polls, attempts FROM extraction_queue"
                " WHERE seq = ? AND namespace = ?",
                (seq, namespace),
            ).fetchone()
            if row is not None:
                found.append(tuple(row))
        return found

    def _summary(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        namespace = arguments.get("namespace", HOME_NAMESPACE)
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM memories WHERE namespace = ?", (namespace,)
        ).fetchone()
        (last,) = self._db.execute(
            "SELECT MAX(written_at) FROM memories WHERE namespace = ?", (namespace,)
        ).fetchone()
        return {
            "org": DEV_ORG,
            "namespace": namespace,
            "shared_namespaces": list(SHARED_NAMESPACES),
            "memory_count": count,
            "last_write_at": last,
        }

    def _memory_set(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        namespace = arguments.get("namespace", HOME_NAMESPACE)
        key = arguments.get("memory_key")
        if key is not None:
            held = self._db.execute(
                "SELECT memory_key FROM memories WHERE memory_key = ?", (key,)
            ).fetchone()
            if held is not None:
                return {"memory_key": key, "verdict": "duplicate", "reason": None}
        stored = self._store(namespace, arguments["text"], key=key)
        if stored["verdict"] == "clear":
            tags = json.dumps(arguments.get("tags", []), ensure_ascii=False)
            dates = [arguments.get(name) for name in DETAILS[2:]]
            self._db.execute(
                "INSERT OR REPLACE INTO memory_details"
                " (memory_key, kind, tags, created_at, updated_at, happened_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (stored["memory_key"], arguments.get("kind"), tags, *dates),
            )
        return {**stored, "reason": None, "proposal_id": None}

    def _store(self, namespace: str, text: str, *, key: str | None = None) -> dict[str, str]:
        row = self._db.execute(
            "SELECT memory_key FROM memories WHERE namespace = ? AND text = ?", (namespace, text)
        ).fetchone()
        if row is not None:
            return {"memory_key": row[0], "verdict": "duplicate"}
        now = datetime.now(UTC).isoformat(timespec="seconds")
        cursor = self._db.execute(
            "INSERT INTO memories (namespace, memory_key, text, written_at) VALUES (?, ?, ?, ?)",
            (namespace, key or f"pending-{uuid.uuid4()}", text, now),
        )
        if key is None:
            key = f"{namespace}-{cursor.lastrowid}"
            self._db.execute(
                "UPDATE memories SET memory_key = ? WHERE id = ?", (key, cursor.lastrowid)
            )
        return {"memory_key": key, "verdict": "clear"}


def _queue_seq(queue_id: str) -> int | None:
    """The row behind a queue id this stand-in made (``q-<n>``); None for any other text."""
    digits = queue_id.removeprefix(QUEUE_ID_PREFIX)
    made_here = queue_id.startswith(QUEUE_ID_PREFIX) and 0 < len(digits) <= QUEUE_SEQ_MAX_DIGITS
    return int(digits) if made_here and digits.isascii() and digits.isdigit() else None
