"""The state file has one owner (SWEEP-2): every statement on its tables lives in
provisioner/runtime/state/, and the store hands no SQL in or out."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from provisioner.runtime.state import ReadOnlyState, StateStore
from provisioner.runtime.state.schema import MIGRATIONS
from tests.support.repo import REPO_ROOT

PACKAGE = REPO_ROOT / "provisioner"
OWNER = PACKAGE / "runtime" / "state"
TABLES = sorted(set(re.findall(r"CREATE TABLE (\w+)", "".join(MIGRATIONS))))
STATEMENT = re.compile(
    r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE)\s+(?:" + "|".join(TABLES) + r")\b", re.IGNORECASE
)


def _texts(path: Path) -> list[str]:
    """The string literals of a module, f-strings' literal parts included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is str]


class TestOneOwner:
    def test_the_schema_names_the_tables_this_test_looks_for(self) -> None:
        assert {"sweep_session", "queued_batch", "migration_item", "last_error"} <= set(TABLES)

    def test_no_module_outside_the_state_package_holds_a_statement_on_its_tables(self) -> None:
        found = {
            str(path.relative_to(REPO_ROOT)): hits
            for path in sorted(PACKAGE.rglob("*.py"))
            if OWNER not in path.parents
            for hits in [[text for text in _texts(path) if STATEMENT.search(text)]]
            if hits
        }
        assert found == {}

    def test_the_owner_itself_holds_them(self) -> None:
        """The search above finds what it looks for where it is."""
        inside = [text for path in OWNER.glob("*.py") for text in _texts(path)]
        assert any(STATEMENT.search(text) for text in inside)

    def test_neither_the_store_nor_the_reader_takes_sql_from_a_caller(self) -> None:
        for owner in (StateStore, ReadOnlyState):
            public = {
                name: inspect.signature(member)
                for name, member in inspect.getmembers(owner, inspect.isfunction)
                if not name.startswith("_")
            }
            assert not {"read", "transaction", "read_at_once"} & set(public)
            taking_sql = [name for name, sig in public.items() if "sql" in sig.parameters]
            assert taking_sql == []
