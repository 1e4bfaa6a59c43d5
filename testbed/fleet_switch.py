"""Instances on memU as a platform runs them, built for the switch's tests and benchmark
(FLEET-7…FLEET-9).

Each instance is a folder ``<name>/`` holding a workspace provisioned for memU (``ws``, with an
agent's line in AGENTS.md when asked), its configuration folder (``config``, naming memU) and
Nerve's state folder (``nerve``): memU's store (``memu.sqlite``, memu-py's layout,
``testbed.memu_db``) with ``items`` items, and ``nerve.db`` in Nerve's schema
(``testbed.nerve_db``) with ``sessions`` sessions of ``messages`` messages each,
memU's ``last_memorized_at`` halfway through the first ``memorized`` of them. Texts carry the
instance's name, so every memory and message of the fleet is its own. A workspace is
provisioned once per fleet by a real init and copied, since every instance of one profile and
backend is worded the same.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from testbed.memu_db import MemuDb, memu_time
from testbed.nerve_db import NerveDb, native

AGENT_LINE = "Agent's own note: answer in short paragraphs."


@dataclass(frozen=True)
class Shape:
    """What each instance holds."""

    items: int = 3
    sessions: int = 2
    messages: int = 4
    memorized: int = 1


def message_text(name: str, session: int, n: int) -> str:
    return f"{name} session {session} turn {n}: the user keeps bees on the roof"


def item_text(name: str, n: int) -> str:
    return f"{name} fact {n}: the user prefers tea with breakfast number {n}"


def provision_template(root: Path) -> Path:
    """One workspace provisioned for memU by ``nerve-provisioner init``; copied per instance."""
    from provisioner.cli.main import main

    template = root / "_template"
    said = io.StringIO()
    with redirect_stdout(said), redirect_stderr(said):
        status = main(
            ["init", "--non-interactive", "--workspace", str(template / "ws"),
             "--config-dir", str(template / "config")]
        )  # fmt: skip
    assert status == 0, said.getvalue()
    return template


def build_instance(
    root: Path, template: Path, name: str, shape: Shape, *, edited: bool = False
) -> Path:
    """Instance ``name`` under ``root`` (see the module docstring); its folder."""
    folder = root / name
    shutil.copytree(template / "ws", folder / "ws", symlinks=True)
    (folder / "config").mkdir(parents=True)
    (folder / "config" / "config.yaml").write_text("memory:\n  backend: memu\n", "utf-8")
    if edited:
        agents = folder / "ws" / "AGENTS.md"
        agents.write_text(agents.read_text("utf-8") + f"\n{AGENT_LINE}\n", "utf-8")
    nerve = folder / "nerve"
    nerve.mkdir()
    if shape.items:
        fill_memu(nerve / "memu.sqlite", name, shape.items)
    if shape.sessions:
        fill_nerve_db(nerve / "nerve.db", name, shape)
    return folder


def fill_memu(path: Path, name: str, items: int) -> None:
    MemuDb(path)  # the tables, as memu-py lays them out
    db = sqlite3.connect(path)
    with db:
        db.executemany(
            "INSERT INTO memu_memory_items (id, created_at, updated_at, memory_type, summary)"
            " VALUES (?, ?, ?, 'knowledge', ?)",
            [
                (f"{name}-item-{n}", memu_time(n), memu_time(n), item_text(name, n))
                for n in range(items)
            ],
        )
    db.close()


def fill_nerve_db(path: Path, name: str, shape: Shape) -> None:
    nerve = NerveDb(path)
    try:
        rows = []
        for session in range(shape.sessions):
            session_id = nerve.session(f"{name}-s{session}")
            for n in range(shape.messages):
                role = "user" if n % 2 == 0 else "assistant"
                rows.append((session_id, role, message_text(name, session, n), native(session, n)))
        nerve.add_rows(rows)
        for session in range(shape.memorized):  # memU took the first half of these
            taken = native(session, shape.messages // 2 - 1)  # memU took up to this one
            nerve.set_last_memorized_at(f"{name}-s{session}", taken)
    finally:
        nerve.close()


def expected_swept(names: list[str], shape: Shape) -> list[str]:
    """The messages the switch must hand Loom: all but memU's share, each once."""
    texts = []
    for name in names:
        for session in range(shape.sessions):
            first = shape.messages // 2 if session < shape.memorized else 0
            texts += [message_text(name, session, n) for n in range(first, shape.messages)]
    return texts


def inventory(root: Path, names: list[str]) -> Path:
    path = root / "fleet.yaml"
    path.write_text(
        "".join(
            f"- {{workspace: {name}/ws, config_dir: {name}/config, nerve_home: {name}/nerve}}\n"
            for name in names
        ),
        encoding="utf-8",
    )
    return path
