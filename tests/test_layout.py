"""The layout shows the architecture, and the documented names live where the docs say.

The package is read as text (``ast``), as a reviewer reads it: every import counts, at module
level, inside functions and under ``if TYPE_CHECKING:`` alike. A type-only import never runs,
but it ties two modules as firmly for whoever reads or moves them, so a circle through one is
still a circle. The rooms and their rules are described in docs/architecture.md ("The rooms").
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from tests.support.repo import REPO_ROOT

PACKAGE = REPO_ROOT / "provisioner"
TOP_LEVEL_MODULES_MAX = 10  # modules directly in provisioner/, the rest in rooms
RUNTIME_TOP_LEVEL_MODULES_MAX = 8  # modules directly in provisioner/runtime/
# The host API (docs/host-api.md): the only public names; every module path under them may move.
HOST_API = [
    "LoomMemory",
    "MemoryUnavailable",
    "NerveMemory",
    "NerveTranscripts",
    "OperatorMustAct",
    "ProvisionerRuntimeError",
    "StateStore",
    "StoreFault",
    "Sweeper",
    "TranscriptSource",
    "allow_config_keys",
    "cron_job_prompt",
    "doctor_lines",
    "extend_cli",
    "external_agent_first_action",
    "external_agent_footer",
    "fastapi_router",
    "hidden_tools",
    "load_cron_jobs",
    "memory_backend",
    "nerve_memory",
    "nerve_router",
    "nerve_settings",
    "nerve_sweeper",
    "session_context",
]
RUNTIME_FACE = [
    "LoomMemory",
    "MemoryUnavailable",
    "OperatorMustAct",
    "ProvisionerRuntimeError",
    "StateStore",
    "StoreFault",
    "Sweeper",
    "TranscriptSource",
    "memory_backend",
]
# The rooms from the top floor down (docs/architecture.md, "The rooms"): a module may import
# its own room and the rooms below it, never one above. The runtime stands alone on the ground
# floor; ``provisioner`` itself holds only the version, there too.
ROOMS_TOP_DOWN = [
    "provisioner.__main__",
    "provisioner.integrations",
    "provisioner.cli",
    "provisioner.golden",
    "provisioner.fleet",
    "provisioner.doctor",
    "provisioner.web",
    "provisioner.devgateway",
    "provisioner.migration",
    "provisioner.workspace",
    "provisioner.templating",
    "provisioner.config",
    "provisioner.backends",
    "provisioner.base",
    "provisioner.runtime",
]
RUNTIME_FACES = {"provisioner.runtime", "provisioner.runtime.face"}  # what other rooms import of it
SIDE_BY_SIDE = [("provisioner.templating", "provisioner.config")]  # neither imports the other
DOTTED_NAME = re.compile(r"`(provisioner(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def imported_modules(name: str) -> set[str]:
    """The package's own modules that ``name`` imports (a package stands for its __init__)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                anchor = name.split(".") if name in PACKAGES else name.split(".")[:-1]
                base = ".".join([*anchor[: len(anchor) - node.level + 1], node.module])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_circles() -> list[list[str]]:
    """Strongly connected groups of more than one module (packages' re-exports aside)."""
    graph = {name: imported_modules(name) - PACKAGES for name in MODULES if name not in PACKAGES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return circles


def room_of(module: str) -> str:
    """The room ``module`` lives in: the longest entry of ``ROOMS_TOP_DOWN`` it is under."""
    if module == "provisioner":
        return "provisioner.runtime"
    for room in sorted(ROOMS_TOP_DOWN, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    raise AssertionError(f"{module} is in no room of ROOMS_TOP_DOWN")


def climbs(name: str, targets: set[str]) -> list[str]:
    """The imports of ``name`` among ``targets`` that reach a room above its own."""
    floor = {room: index for index, room in enumerate(ROOMS_TOP_DOWN)}
    own = floor[room_of(name)]
    return [f"{name} -> {t}" for t in sorted(targets) if floor[room_of(t)] < own]


def upward_imports() -> list[str]:
    """Every import that climbs: a module importing a room above its own."""
    return [climb for name in MODULES for climb in climbs(name, imported_modules(name))]


def rooms_imported_by(room: str) -> set[str]:
    """The other rooms the modules of ``room`` import."""
    return {
        room_of(target)
        for name in MODULES
        if room_of(name) == room
        for target in imported_modules(name)
        if room_of(target) != room
    }


def room_table() -> dict[str, set[str]]:
    """docs/architecture.md's table of rooms: each room, in the table's order, with the rooms
    its last column says it imports."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = text.split("| Room | What lives there | Imports |", 1)[1].split("\n\n", 1)[0]
    table: dict[str, set[str]] = {}
    for row in rows.strip().splitlines()[1:]:
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        room = "provisioner." + cells[0].strip("`").removesuffix("/").removesuffix(".py")
        table[room] = {f"provisioner.{name}" for name in re.findall(r"`([a-z_]+)`", cells[-1])}
    return table


def _modules_directly_in(folder: Path) -> list[str]:
    return sorted(
        path.name for path in folder.glob("*.py") if path.name not in ("__init__.py", "__main__.py")
    )


class TestRooms:
    def test_no_module_imports_itself_around_a_circle(self) -> None:
        assert import_circles() == []

    def test_every_module_lives_in_a_room(self) -> None:
        assert sorted({room_of(name) for name in MODULES}) == sorted(ROOMS_TOP_DOWN)

    def test_imports_go_down_the_rooms_never_up(self) -> None:
        assert upward_imports() == []

    @pytest.mark.parametrize(("left", "right"), SIDE_BY_SIDE)
    def test_rooms_side_by_side_do_not_import_each_other(self, left: str, right: str) -> None:
        for one, other in ((left, right), (right, left)):
            crossing = [
                f"{name} -> {target}"
                for name in MODULES
                if room_of(name) == one
                for target in imported_modules(name)
                if room_of(target) == other
            ]
            assert crossing == []

    def test_the_room_table_lists_the_rooms_in_order_with_what_each_imports(self) -> None:
        """docs/architecture.md's table of rooms is the code's: the same floors top down, and
        for each room exactly the rooms its modules import."""
        table = room_table()
        assert list(table) == [room for room in ROOMS_TOP_DOWN if room != "provisioner.__main__"]
        for room, documented in table.items():
            assert documented == rooms_imported_by(room), room

    def test_the_provisioning_side_reaches_the_runtime_through_its_two_faces(self) -> None:
        """Outside provisioner/runtime/, a module imports the runtime's host face
        (``provisioner.runtime``) or its face to the package (``provisioner.runtime.face``),
        never a module inside, so every module in there stays internal and may move."""
        reaching_in = [
            f"{name} -> {target}"
            for name in MODULES
            if room_of(name) != "provisioner.runtime"
            for target in sorted(imported_modules(name))
            if room_of(target) == "provisioner.runtime"
            and target not in {*RUNTIME_FACES, "provisioner"}  # the package's version
        ]
        assert reaching_in == []

    def test_every_name_of_the_face_is_used_outside_the_runtime(self) -> None:
        """The face names what the other rooms use and nothing more: each of its names is
        imported by a module outside the runtime, and each is there at its home."""
        face = importlib.import_module("provisioner.runtime.face")
        used: set[str] = set()
        for name, path in MODULES.items():
            if room_of(name) == "provisioner.runtime":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "provisioner.runtime.face":
                    used |= {alias.name for alias in node.names}
        assert sorted(set(face.__all__) - used) == []
        for name in face.__all__:
            assert getattr(face, name) is not None, name

    def test_the_room_check_sees_a_climb(self) -> None:
        """The order check is not empty-handed: an import up a floor is named, one down is not."""
        assert climbs("provisioner.golden.check", {"provisioner.cli.main"}) == [
            "provisioner.golden.check -> provisioner.cli.main"
        ]
        assert climbs("provisioner.runtime.state", {"provisioner.runtime.errors"}) == []
        assert climbs("provisioner.runtime.state", {"provisioner.workspace.fs"}) != []

    def test_the_import_reader_sees_the_imports_it_must(self) -> None:
        """The reader behind the circle test finds imports in every form the package uses."""
        assert "provisioner.backends" in imported_modules("provisioner.templating.texts")
        assert "provisioner.doctor.check" in imported_modules("provisioner.doctor.config")

    def test_few_modules_stand_outside_a_room(self) -> None:
        assert len(_modules_directly_in(PACKAGE)) <= TOP_LEVEL_MODULES_MAX
        assert len(_modules_directly_in(PACKAGE / "runtime")) <= RUNTIME_TOP_LEVEL_MODULES_MAX

    @pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("provisioner.")))
    def test_the_runtime_is_imported_by_others_never_the_reverse(self, name: str) -> None:
        if name.startswith("provisioner.runtime"):
            outside = {m for m in imported_modules(name) if room_of(m) != "provisioner.runtime"}
            assert not outside, f"{name} imports {sorted(outside)}"

    @pytest.mark.parametrize("package", sorted(PACKAGES))
    def test_every_room_says_what_lives_there(self, package: str) -> None:
        path = MODULES[package]
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert docstring and len(docstring.split()) >= 12, f"{path} has no room docstring"


class TestDocumentedNames:
    @pytest.mark.parametrize(
        ("face", "names"),
        [("provisioner.integrations.nerve", HOST_API), ("provisioner.runtime", RUNTIME_FACE)],
    )
    def test_every_public_name_of_the_runtime_imports_from_the_runtime(
        self, face: str, names: list[str]
    ) -> None:
        """The host API (docs/host-api.md) and the runtime's half of it: exactly these names."""
        package = importlib.import_module(face)
        assert sorted(package.__all__) == sorted(names)
        for name in package.__all__:
            assert getattr(package, name) is not None, name

    def test_the_host_api_page_names_each_name_and_the_rule(self) -> None:
        text = (REPO_ROOT / "docs" / "host-api.md").read_text(encoding="utf-8")
        assert "only these names are public" in text
        for name in HOST_API:
            assert f"| `{name}` |" in text, name

    def test_the_runtime_face_is_the_runtime_half_of_the_host_api(self) -> None:
        host = importlib.import_module("provisioner.integrations.nerve")
        runtime = importlib.import_module("provisioner.runtime")
        assert set(RUNTIME_FACE) <= set(HOST_API)
        for name in RUNTIME_FACE:
            assert getattr(host, name) is getattr(runtime, name), name

    @pytest.mark.parametrize("name", HOST_API)
    def test_every_method_the_host_api_page_promises_is_there(self, name: str) -> None:
        """A row of the host API's table that names a call (`open()`, `run_once()`) promises
        it on that name: each is an attribute of it, unless the row says it has ``no`` such or
        that something else ``adds`` it."""
        host = importlib.import_module("provisioner.integrations.nerve")
        value = getattr(host, name)
        text = (REPO_ROOT / "docs" / "host-api.md").read_text(encoding="utf-8")
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        promised = set(re.findall(r"(?<!no )(?<!adds )`([a-z_]+)\(", row.split(" | ", 2)[1]))
        if not inspect.isclass(value):
            promised = set()  # a function's row names what it returns, not its attributes
        assert [call for call in sorted(promised) if not hasattr(value, call)] == []

    def test_the_promise_check_reads_the_calls_of_a_row(self) -> None:
        """The check above is not empty-handed: NerveMemory's row promises its calls."""
        text = (REPO_ROOT / "docs" / "host-api.md").read_text(encoding="utf-8")
        row = next(line for line in text.splitlines() if line.startswith("| `NerveMemory` |"))
        assert {"tool_registry", "mcp_servers", "sweep"} <= set(re.findall(r"`([a-z_]+)\(", row))

    @pytest.mark.parametrize(
        "page",
        [
            *sorted(p.relative_to(REPO_ROOT).as_posix() for p in REPO_ROOT.glob("docs/*.md")),
            "README.md",
        ],
    )
    def test_every_dotted_name_a_page_writes_resolves(self, page: str) -> None:
        """The documented API is where the docs say: each `provisioner.…` name imports."""
        text = (REPO_ROOT / page).read_text(encoding="utf-8")
        for dotted in sorted(set(DOTTED_NAME.findall(text))):
            assert _resolves(dotted), f"{page} names {dotted}, which does not import"


def _resolves(dotted: str) -> bool:
    """True when ``dotted`` is a module, or a module's attribute (a class's too)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False
