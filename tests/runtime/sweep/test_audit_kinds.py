"""The audit log's kinds, named once, and the index its readers lean on (SWEEP-13, MIG-2)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from provisioner.runtime.state import (
    AUDIT_BATCH_KINDS,
    AUDIT_KINDS,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_SHOWN_KINDS,
    AUDIT_SKIPPED,
    AuditEntry,
    StateStore,
)
from provisioner.runtime.state import schema as state_file
from tests.support.repo import REPO_ROOT
from tests.support.state_sql import state_rows

PACKAGE = REPO_ROOT / "provisioner"
REGISTRY = Path(state_file.__file__)


def module_constants(path: Path) -> dict[str, object]:
    """The module-level ``AUDIT_*`` names a file assigns, with their literal values."""
    names: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id.startswith("AUDIT_"):
                        value = node.value
                        names[name.id] = value.value if isinstance(value, ast.Constant) else None
    return names


class TestOneRegistry:
    def test_every_kind_is_listed_once_and_no_two_share_a_name(self) -> None:
        kinds = {
            name: value
            for name, value in module_constants(REGISTRY).items()
            if isinstance(value, str)
        }
        assert sorted(AUDIT_KINDS) == sorted(kinds.values())
        assert len(set(AUDIT_KINDS)) == len(AUDIT_KINDS)

    def test_no_other_module_names_an_audit_kind(self) -> None:
        """One place: a kind defined elsewhere would be missed by status's default list."""
        elsewhere = {
            str(path.relative_to(REPO_ROOT)): sorted(module_constants(path))
            for path in PACKAGE.rglob("*.py")
            if path != REGISTRY and module_constants(path)
        }
        assert elsewhere == {}

    def test_the_registry_needs_the_standard_library_alone_so_doctor_loads_no_client(
        self,
    ) -> None:
        """The registry's imports, and those of the package's own modules it imports in turn."""
        imported: set[str] = set()
        unread, read = [REGISTRY], set()
        while unread:
            path = unread.pop()
            read.add(path)
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [f"{node.module}.{alias.name}" for alias in node.names]
                for name in names:
                    own = _own_module(name)
                    if own is None:
                        imported.add(name.split(".")[0])
                    elif own not in read:
                        unread.append(own)
        assert imported <= sys.stdlib_module_names | {"__future__"}


def _own_module(dotted: str) -> Path | None:
    """The package's file ``dotted`` names (a module, or a name in one), else None."""
    parts = dotted.split(".")
    if parts[0] != "provisioner":
        return None
    for cut in range(len(parts), 1, -1):
        path = REPO_ROOT.joinpath(*parts[:cut])
        if path.with_suffix(".py").is_file():
            return path.with_suffix(".py")
        if (path / "__init__.py").is_file():
            return path / "__init__.py"
    return None


class TestStatusListsEveryKindButTheBatches:
    def test_a_row_of_each_kind_comes_back_but_the_per_batch_rows(self, state: StateStore) -> None:
        rows = [AuditEntry(kind, "s-1", index) for index, kind in enumerate(AUDIT_KINDS)]
        state.record_audit(rows, now=1.0)
        listed = [row["kind"] for row in state.audit()]
        assert listed == list(AUDIT_SHOWN_KINDS)
        assert not set(listed) & set(AUDIT_BATCH_KINDS)

    def test_the_newest_shown_rows_are_found_behind_many_batch_rows(
        self, state: StateStore
    ) -> None:
        state.record_audit([AuditEntry(AUDIT_SKIPPED, "s-1", 1)], now=1.0)
        batches = [AuditEntry(AUDIT_BATCH_KINDS[0], "s-1", n) for n in range(2, 500)]
        state.record_audit(batches, now=2.0)
        assert [row["kind"] for row in state.audit(limit=5)] == [AUDIT_SKIPPED]


class TestTheIndex:
    """A row per batch is kept for good, so a read by kind must not walk them all: the plan
    SQLite chooses shows it, with no clock read."""

    @pytest.mark.parametrize(
        "sql",
        [
            "SELECT seq FROM sweep_audit WHERE kind IN (?, ?, ?) ORDER BY seq",
            "SELECT COUNT(*) FROM sweep_audit WHERE kind IN (?, ?) AND recorded_at > ?",
            "SELECT detail FROM sweep_audit WHERE kind = ? AND recorded_at >= ? ORDER BY seq",
        ],
        ids=["the start-point ledger", "batches since an error", "the first failure since"],
    )
    def test_reads_by_kind_search_the_index(self, state: StateStore, sql: str) -> None:
        parameters = [AUDIT_LEFT_TO_MEMU] * sql.count("?")
        plan = " ".join(
            str(row["detail"]) for row in state_rows(state, f"EXPLAIN QUERY PLAN {sql}", parameters)
        )
        assert "SEARCH sweep_audit USING" in plan and "INDEX sweep_audit_by_kind" in plan
        assert "SCAN sweep_audit" not in plan
