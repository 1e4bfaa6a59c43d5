"""The documentation held to the code, so that it cannot drift (DOC-2).

Each class reads the docs and the code side by side: the configuration keys of
docs/config.md against the loader's schema (``provisioner.config.checks.known_keys``), every option
of the real command-line parser against the README's Commands table, every runtime number a
page states against the constant that sets it, the pages DOC-2 asks for, and the README's
quick tour, run as written.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from provisioner.cli.main import build_parser
from provisioner.config.checks import known_keys
from provisioner.runtime.gateway import breaker
from tests.support.doc_numbers import (
    FENCED,
    REPO_ROOT,
    TaggedNumber,
    stated_value,
    tagged_numbers,
    untagged_numbers,
)
from tests.support.processes import RunNerve
from tests.support.readme_blocks import (
    README,
    port_is_free,
    readme_section,
    run_commands,
    section_commands,
)

DOCS = REPO_ROOT / "docs"
CONFIG_PAGE = DOCS / "config.md"
GATEWAY_PAGE = DOCS / "gateway.md"


def page_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def every_doc() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


# --- configuration keys -----------------------------------------------------------------------

KEY_TABLE_HEADING = "## Every key"
# memU's section is carried through to Nerve unchecked; its own keys are memU's business.
PASS_THROUGH_SECTIONS = ("memory.memu.",)


def key_table() -> list[str]:
    """The keys of docs/config.md's key table: the first cell of each row, in backticks."""
    section = page_text(CONFIG_PAGE).split(KEY_TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_.]+)` \|", section, flags=re.MULTILINE)


def loom_op_names() -> set[str]:
    """Loom's op names from the contract fixture: ``memory.set`` is an op, not a key."""
    fixture = json.loads(page_text(REPO_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json"))
    return {*fixture["ops"], *fixture["agent_ops"]}


class TestConfigPageAgainstTheSchema:
    """docs/config.md names exactly the keys the loader knows (DOC-2, CONF-4…CONF-6)."""

    def test_every_key_in_the_table_is_one_the_loader_knows(self) -> None:
        assert key_table(), "docs/config.md has no key table"
        assert set(key_table()) <= set(known_keys())

    def test_every_key_the_loader_knows_is_in_the_table(self) -> None:
        assert set(known_keys()) <= set(key_table())

    def test_the_table_names_each_key_once(self) -> None:
        assert len(key_table()) == len(set(key_table()))

    def test_every_dotted_key_the_page_names_is_known(self) -> None:
        pattern = r"`((?:memory|lockdown|mcp_gateway_url)[a-z_.]*)`"
        named = set(re.findall(pattern, page_text(CONFIG_PAGE))) - loom_op_names()
        unknown = {
            key
            for key in named
            if key not in known_keys() and not key.startswith(PASS_THROUGH_SECTIONS)
        }
        assert not unknown


# --- command line -----------------------------------------------------------------------------


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("nerve-provisioner",)
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command of the real parser that runs something, with its words."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups or path == ("nerve-provisioner",):
        yield " ".join(path), parser
    for group in groups:
        for name, sub in group.choices.items():
            yield from commands(sub, (*path, name))


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options and positionals a user writes, without argparse's own ``--help``."""
    return [
        action
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    ]


def spelled(action: argparse.Action) -> str:
    """How the README writes an option: its longest flag, or a positional's metavar."""
    if action.option_strings:
        return max(action.option_strings, key=len)
    return str(action.metavar or action.dest.upper())


def command_rows() -> dict[str, str]:
    """The README's Commands table: command words → the whole row."""
    rows = {}
    table = readme_section("## Commands")
    for row in re.findall(r"^\| `(nerve-provisioner [^`]*)` \|.*$", table, re.M):
        words = " ".join(word for word in row.split() if re.fullmatch(r"[a-z]+(-[a-z]+)?", word))
        rows[words] = row
    return rows


ALL_COMMANDS = list(commands(build_parser()))
COMMAND_IDS = [name for name, _ in ALL_COMMANDS]


class TestCommandLineDocumented:
    """Every command and every option of the real parser is documented (DOC-2)."""

    def test_the_parser_has_the_memory_dev_golden_and_doctor_commands(self) -> None:
        for name in (
            "nerve-provisioner memory sweep",
            "nerve-provisioner dev gateway",
            "nerve-provisioner golden check",
        ):
            assert name in COMMAND_IDS
        assert "nerve-provisioner doctor" in COMMAND_IDS

    @pytest.mark.parametrize(("name", "parser"), ALL_COMMANDS, ids=COMMAND_IDS)
    def test_every_option_has_help_text(self, name: str, parser: argparse.ArgumentParser) -> None:
        missing = [spelled(a) for a in options(parser) if not (a.help or "").strip()]
        assert not missing, f"{name}: no help for {missing}"

    @pytest.mark.parametrize(("name", "parser"), ALL_COMMANDS, ids=COMMAND_IDS)
    def test_every_option_is_in_the_commands_row(
        self, name: str, parser: argparse.ArgumentParser
    ) -> None:
        row = command_rows().get(name)
        assert row is not None, f"README.md's Commands table has no row for {name}"
        missing = [spelled(a) for a in options(parser) if spelled(a) not in row]
        assert not missing, f"{name}: {missing} not in its README row"

    def test_every_row_is_a_command_that_exists(self) -> None:
        assert set(command_rows()) <= set(COMMAND_IDS)

    @pytest.mark.parametrize(("name", "parser"), ALL_COMMANDS, ids=COMMAND_IDS)
    def test_every_option_is_explained_on_a_docs_page(
        self, name: str, parser: argparse.ArgumentParser
    ) -> None:
        docs = "\n".join(page_text(path) for path in sorted(DOCS.glob("*.md")))
        missing = [spelled(a) for a in options(parser) if spelled(a) not in docs]
        assert not missing, f"{name}: {missing} appear on no page under docs/"


# --- runtime numbers --------------------------------------------------------------------------

# Pages whose numbers describe what the package does at run time.
NUMBER_PAGES = [
    README,
    *(DOCS / f"{name}.md" for name in ("architecture", "config", "memory", "setup", "sweep")),
    DOCS / "troubleshooting.md",
    DOCS / "import.md",
]
# Numbers stated without a constant of this package behind them, each with the reason.
NOT_OURS = {
    "120 s": "the gateway's own call limit, set by the platform (contracts/gateway.md)",
    "10 s": "DOC-1's bound on a whole doctor run, held by tests/doctor/test_doctor_network.py",
    "2 s": "the README's benchmark target for the golden check, not a runtime number",
    "three times": "Loom's own retries of a queued batch, out of Nerve's sight",
}
TAGGED = [number for path in NUMBER_PAGES for number in tagged_numbers(path)]


class TestRuntimeNumbers:
    """Every runtime number a page states is the value of the constant that sets it (DOC-2)."""

    @pytest.mark.parametrize("number", TAGGED, ids=[f"{n.page}:{n.name}={n.text}" for n in TAGGED])
    def test_a_tagged_number_is_its_constants_value(self, number: TaggedNumber) -> None:
        assert number.stated() == number.actual(), (
            f"{number.page} says {number.text} for {number.module}.{number.name}, "
            f"which is {number.actual()}"
        )

    @pytest.mark.parametrize("path", NUMBER_PAGES, ids=[p.name for p in NUMBER_PAGES])
    def test_no_number_with_a_unit_is_left_untagged(self, path: Path) -> None:
        untagged = [n for n in untagged_numbers(page_text(path)) if n not in NOT_OURS]
        assert not untagged, f"{path.name} states {untagged} without its constant"

    def test_the_tags_cover_the_numbers_the_issue_names(self) -> None:
        names = {number.name for number in TAGGED}
        for name in (
            "CATALOG_MIN_INTERVAL_S",
            "BREAKER_FIRST_OPEN_S",
            "BREAKER_MAX_OPEN_S",
            "RETRY_AFTER_MAX_WAIT_S",
            "RECALL_DEADLINE_S",
            "CATALOG_DEADLINE_S",
            "WAITING_MAX_MESSAGES",
            "WAITING_MAX_BYTES",
            "EXTRACT_DEADLINE_S",
            "QUEUED_MAX_MESSAGES",
            "QUEUED_MAX_BYTES",
            "MIN_MESSAGES",
            "MIN_BYTES",
            "GOOD_BATCHES_TO_GROW",
            "FAILURES_TO_ISOLATE",
        ):
            assert name in names


class TestNumberReading:
    """The reader behind TestRuntimeNumbers catches a stale number (DOC-2)."""

    def test_a_number_that_no_longer_matches_its_constant_is_told_apart(
        self, tmp_path: Path
    ) -> None:
        module = REPO_ROOT / "provisioner" / "runtime" / "gateway" / "breaker.py"
        page = tmp_path / "stale.md"
        page.write_text(
            f"It opens for [{breaker.BREAKER_FIRST_OPEN_S + 1:g} s][BREAKER_FIRST_OPEN_S], "
            f"then for up to [{breaker.BREAKER_MAX_OPEN_S:g} s][BREAKER_MAX_OPEN_S].\n\n"
            f"[BREAKER_FIRST_OPEN_S]: {module}\n[BREAKER_MAX_OPEN_S]: {module}\n",
            encoding="utf-8",
        )
        stale, current = tagged_numbers(page)
        assert stale.actual() == breaker.BREAKER_FIRST_OPEN_S != stale.stated()
        assert current.stated() == current.actual() == breaker.BREAKER_MAX_OPEN_S

    def test_a_number_in_prose_is_found_and_one_in_code_is_not(self) -> None:
        text = "Waits 15 s and sends ten good batches.\n\n```\nwithin 5 s\n```\nand `2 s`.\n"
        assert untagged_numbers(text) == ["15 s", "ten good batches"]

    @pytest.mark.parametrize(
        ("text", "value"),
        [
            ("128 KiB", 131072.0),
            ("5 minutes", 300.0),
            ("1 048 576 bytes", 1048576.0),
            ("50 ms", 0.05),
            ("three", 3.0),
            ("4,000 characters", 4000.0),
        ],
    )
    def test_a_stated_number_is_read_in_the_constants_units(self, text: str, value: float) -> None:
        assert stated_value(text) == value


# The gateway page is kept by the gateway client's owners; its sentences are read as they are.
# Each claim is a pattern whose groups are numbers, and the constants they must equal.
GATEWAY_CLAIMS = [
    (
        r"The read has (5 s) in all \((2 s) to connect\), stops at\s+(8 MiB)",
        [
            "runtime.gateway.catalog.CATALOG_DEADLINE_S",
            "runtime.gateway.transport.CONNECT_TIMEOUT_S",
            "runtime.gateway.catalog.CATALOG_MAX_BYTES",
        ],
    ),
    (r"at most once every\s+(30 s)", ["runtime.gateway.catalog.CATALOG_MIN_INTERVAL_S"]),
    (r"has its own (5 s)", ["runtime.gateway.catalog.CATALOG_DEADLINE_S"]),
    (r"the only read of the\s+next (30 s)", ["runtime.gateway.catalog.CATALOG_MIN_INTERVAL_S"]),
    (r"capped at (300 characters)", ["runtime.gateway.errors.MESSAGE_MAX_CHARS"]),
    (r"Tool answers are capped at (8 MiB)", ["runtime.gateway.transport.ANSWER_MAX_BYTES"]),
    (r"in the background for up to (50 ms)", ["runtime.gateway.transport.STREAM_TAIL_WAIT_S"]),
    (r"if it is at most (2 s)", ["runtime.gateway.client.RETRY_AFTER_MAX_WAIT_S"]),
    (r"longer than (2 s) or than", ["runtime.gateway.client.RETRY_AFTER_MAX_WAIT_S"]),
    (r"opens the breaker for\s+(15 s)", ["runtime.gateway.breaker.BREAKER_FIRST_OPEN_S"]),
]
# Numbers on the gateway page that are not constants: examples and the soak tests' sizes.
GATEWAY_EXAMPLES = (
    "50 ms left",
    "ten calls at a cold start",
    "1,000 calls",
    "100 concurrent calls",
)


def breaker_openings() -> list[float]:
    """The breaker's open periods while failures go on: doubling, capped (GW-7)."""
    periods = [breaker.BREAKER_FIRST_OPEN_S]
    while periods[-1] < breaker.BREAKER_MAX_OPEN_S:
        periods.append(min(periods[-1] * 2, breaker.BREAKER_MAX_OPEN_S))
    return periods


class TestGatewayPageNumbers:
    """docs/gateway.md states the gateway client's constants as they are (GW-2, GW-6, GW-7)."""

    @pytest.mark.parametrize(
        ("pattern", "names"), GATEWAY_CLAIMS, ids=[c[1][0] for c in GATEWAY_CLAIMS]
    )
    def test_each_claim_states_its_constant(self, pattern: str, names: list[str]) -> None:
        match = re.search(pattern, page_text(GATEWAY_PAGE))
        assert match is not None, f"docs/gateway.md no longer says {pattern!r}"
        for text, dotted in zip(match.groups(), names, strict=True):
            module, name = dotted.rsplit(".", 1)
            value = getattr(importlib.import_module(f"provisioner.{module}"), name)
            assert stated_value(text) == float(value), f"{text} for {dotted} = {value}"

    def test_the_doubling_sequence_is_the_breakers(self) -> None:
        match = re.search(
            r"twice\s+as long \(([\d, ]+) s, then (\d+) s at most\)", page_text(GATEWAY_PAGE)
        )
        assert match is not None
        stated = [float(n) for n in match[1].split(",")] + [float(match[2])]
        assert stated == breaker_openings()[1:]

    def test_the_outage_example_follows_from_the_breaker(self) -> None:
        text = page_text(GATEWAY_PAGE)
        match = re.search(
            r"Over a (\d+)-minute outage.*?(\d+) calls reach the network \(at ([\d,\sand]+) s\)",
            text,
            re.DOTALL,
        )
        assert match is not None
        outage_s = int(match[1]) * 60
        attempts, at = [0.0], 0.0
        for period in breaker_openings() + [breaker.BREAKER_MAX_OPEN_S] * 10:
            at += period
            if at >= outage_s:
                break
            attempts.append(at)
        stated = [float(n) for n in re.findall(r"\d+", match[3])]
        assert stated == attempts
        assert int(match[2]) == len(attempts)

    def test_every_number_with_a_unit_is_a_claim_or_an_example(self) -> None:
        text = page_text(GATEWAY_PAGE)
        for pattern, _names in GATEWAY_CLAIMS:
            text = re.sub(pattern, " ", text)
        text = re.sub(r"twice\s+as long \([^)]*\)", " ", text)
        text = re.sub(r"(\d+) calls reach the network \(at [\d,\sand]+ s\)", " ", text)
        for example in GATEWAY_EXAMPLES:
            text = text.replace(example, " ")
        assert not untagged_numbers(text)


# --- the pages DOC-2 asks for ---------------------------------------------------------------

DOC2_PAGES = (
    "config",
    "memory",
    "cron",
    "setup",
    "templates",
    "architecture",
    "gateway",
    "troubleshooting",
    "sweep",
)
LINK = re.compile(r"\]\((?P<target>[^)\s#]*)(?:#(?P<anchor>[^)\s]*))?\)")
CHECK_LINE = re.compile(r"^\[(?:OK|WARN|ERR)\]\s+(?P<id>[a-z_.0-9]+):", re.MULTILINE)


def heading_anchors(path: Path) -> set[str]:
    """The anchors a Markdown renderer gives ``path``'s headings (lower case, dashes)."""
    text = FENCED.sub("", page_text(path))
    headings = re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def section_of(path: Path, heading: str) -> str:
    text = page_text(path)
    assert f"\n{heading}\n" in text, f"{path.name} has no {heading!r}"
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def documented_check(check_id: str) -> bool:
    """Whether troubleshooting.md names ``check_id``: as it is, numbered (``….N``), or under a
    family such as ``config.memory.loom.*`` or ``config.warning.*``."""
    text = page_text(DOCS / "troubleshooting.md")
    parts = check_id.split(".")
    names = {check_id, re.sub(r"\.\d+$", ".N", check_id)}
    names |= {".".join(parts[:cut]) + ".*" for cut in range(1, len(parts))}
    return any(f"`{name}`" in text for name in names)


class TestDocumentationPages:
    """The pages DOC-2 lists exist, are linked from the README, and say what it asks."""

    @pytest.mark.parametrize("name", DOC2_PAGES)
    def test_each_page_exists_and_the_readme_links_it(self, name: str) -> None:
        assert (DOCS / f"{name}.md").is_file()
        assert f"(docs/{name}.md)" in readme_section("## Documentation")

    @pytest.mark.parametrize("path", every_doc(), ids=[p.name for p in every_doc()])
    def test_every_relative_link_reaches_a_file(self, path: Path) -> None:
        targets = [m["target"] for m in LINK.finditer(page_text(path))]
        local = [t for t in targets if not re.match(r"[a-z]+:", t)]
        missing = [t for t in local if not (path.parent / t).exists()]
        assert not missing, f"{path.name} links to {missing}"

    @pytest.mark.parametrize("path", every_doc(), ids=[p.name for p in every_doc()])
    def test_every_link_to_a_heading_finds_it(self, path: Path) -> None:
        broken = []
        for match in LINK.finditer(page_text(path)):
            target = path.parent / match["target"] if match["target"] else path
            local_page = target.suffix == ".md" and target.is_file()
            if match["anchor"] and local_page and match["anchor"] not in heading_anchors(target):
                broken.append(f"{match['target']}#{match['anchor']}")
        assert not broken, f"{path.name} links to headings that do not exist: {broken}"

    def test_the_config_page_says_who_calls_what_and_what_happens_without_loom(self) -> None:
        identity = section_of(CONFIG_PAGE, "## Identity")
        assert "namespace.summary" in identity and "home namespace" in identity
        calls = section_of(CONFIG_PAGE, "## Who calls what")
        assert "mcp__loom__" in calls
        for op in loom_op_names() - {"memory.set"}:
            assert f"`{op}`" in calls
        outage = section_of(CONFIG_PAGE, "## When Loom cannot answer")
        assert "could not be recalled" in outage and "watermark" in outage

    def test_the_rollout_switches_once_the_catalog_lists_loom_then_runs_init(self) -> None:
        rollout = section_of(CONFIG_PAGE, "## Rollout")
        assert rollout.index("lists `loom`") < rollout.index("memory.backend: loom")
        assert "nerve-provisioner init --memory-backend loom" in rollout
        assert "config.local.yaml" in rollout

    def test_the_templates_page_has_the_authoring_guide_and_the_golden_workflow(self) -> None:
        assert "nerve-provisioner golden update --backend memu" in section_of(
            DOCS / "templates.md", "## The golden workflow"
        )
        assert "{% include" in page_text(DOCS / "templates.md")

    def test_the_architecture_page_shows_its_pictures(self) -> None:
        text = page_text(DOCS / "architecture.md")
        for image in re.findall(r"!\[[^\]]*\]\((images/[^)]+)\)", text):
            assert (DOCS / image).is_file()
        assert "images/architecture-modules.svg" in text
        assert "images/architecture-flows.svg" in text

    @pytest.mark.parametrize(
        "folder",
        sorted(
            {
                p.parent.relative_to(REPO_ROOT).as_posix()
                for p in REPO_ROOT.glob("provisioner/**/*.py")
            }
        ),
    )
    def test_the_architecture_page_names_every_module_in_its_room(self, folder: str) -> None:
        """Every module is named in a table row or list item of its room (its folder's last
        part, as `gateway/`); the two outside every room by their path."""
        text = page_text(DOCS / "architecture.md")
        entries = _entries(text)
        modules = sorted(p.name for p in (REPO_ROOT / folder).glob("*.py"))
        room = f"`{folder.rpartition('/')[2]}/`"
        missing = []
        for name in modules:
            if name in ("__init__.py", "__main__.py"):
                continue
            if folder == "provisioner":
                named = f"`provisioner/{name}`" in text
            else:
                named = any(room in entry and f"`{name}`" in entry for entry in entries)
            if not named:
                missing.append(name)
        assert not missing, f"docs/architecture.md does not name {missing} under {room}"

    def test_every_module_the_architecture_page_names_in_a_room_exists(self) -> None:
        """The module map names no module that is gone: each `name.py` of an entry that
        opens with its room (`room/`) is a file of a folder of that name under provisioner/."""
        entry_room = re.compile(r"^(?:\| |- )`([a-z_]+)/`")
        module = re.compile(r"`([a-z_]+\.py)`")
        folders: dict[str, set[str]] = {}
        for path in REPO_ROOT.glob("provisioner/**/*.py"):
            folders.setdefault(path.parent.name, set()).add(path.name)
        stale = []
        for entry in _entries(page_text(DOCS / "architecture.md")):
            opening = entry_room.match(entry)
            if opening is None or opening.group(1) not in folders:
                continue
            room = opening.group(1)
            stale += [
                f"{room}/{name}" for name in module.findall(entry) if name not in folders[room]
            ]
        assert not stale, f"docs/architecture.md names modules that do not exist: {stale}"

    def test_the_memory_page_no_longer_calls_the_loom_backend_planned(self) -> None:
        text = page_text(DOCS / "memory.md")
        for stale in ("planned", "not built", "not in the package", "does not exist"):
            assert stale not in text

    @pytest.mark.parametrize("backend", ["memu", "loom"])
    def test_every_check_doctor_prints_offline_has_a_troubleshooting_entry(
        self, backend: str, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        config_dir = tmp_path / "home" / ".nerve"
        config_dir.mkdir(parents=True)
        (config_dir / "config.yaml").write_text(
            f"memory:\n  backend: {backend}\n  colour: blue\n", encoding="utf-8"
        )
        done = run_nerve("doctor", "--offline", "--json", "--config-dir", str(config_dir))
        checks = json.loads(done.stdout)["checks"]
        ids = {check["id"] for check in checks}
        assert "config.warning.memory.colour" in ids
        assert [i for i in ids if not documented_check(i)] == []


# --- the README's quick tour ------------------------------------------------------------------

TOUR = "## Quick tour"
TOUR_MAX_LINES = 10  # the issue's bound
TOUR_STEPS = (
    "nerve-provisioner init",
    "nerve-provisioner render",
    "nerve-provisioner golden check",
    "nerve-provisioner dev gateway",
    "nerve-provisioner memory recall",
    "nerve-provisioner memory sweep",
    "nerve-provisioner doctor",
)
TOUR_PORT = 8787  # the dev gateway's default, which the tour's config line names
CHECKOUT_PARTS = ("pyproject.toml", "golden", "templates", "skills")  # what `golden check` reads


def checkout_copy(target: Path) -> Path:
    """The parts of this checkout that make a folder one, copied to ``target``."""
    for part in CHECKOUT_PARTS:
        source = REPO_ROOT / part
        if source.is_dir():
            shutil.copytree(source, target / part)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / part)
    return target


class TestQuickTour:
    """The README's quick tour is at most ten lines and runs as written (DOC-2)."""

    def test_the_tour_is_ten_lines_at_most_and_takes_every_step(self) -> None:
        lines = section_commands(TOUR)
        assert len(lines) <= TOUR_MAX_LINES
        for step in TOUR_STEPS:
            assert any(step in line for line in lines), f"the tour has no {step}"

    @pytest.mark.slow
    def test_the_tour_runs_as_written_from_a_checkout(self, tmp_path: Path) -> None:
        assert port_is_free(TOUR_PORT), f"the tour's gateway port {TOUR_PORT} is taken"
        home = tmp_path / "home"
        home.mkdir()
        checkout = checkout_copy(tmp_path / "checkout")
        done = run_commands(section_commands(TOUR), cwd=checkout, home=home)
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert "rendered files match golden/" in out
        assert "sweep done: 1 of 1 session," in out
        recalled = out.split("<session-context>", 1)[1].split("</session-context>", 1)[0]
        assert "- I take my tea with lemon." in recalled
        passed = re.search(r"^(\d+)/(\d+) checks passed$", out, re.MULTILINE)
        assert passed is not None and passed[1] == passed[2], out
        printed = CHECK_LINE.findall(out)
        assert {"loom.catalog", "loom.namespace", "loom.sweep"} <= set(printed)
        assert [i for i in printed if not documented_check(i)] == []
        assert (home / "nerve-workspace" / "AGENTS.md").is_file()
        assert (home / "preview" / "AGENTS.md").is_file()


class TestJsonOutputsDocumented:
    """The JSON fields the pages list are the ones the commands print (INIT-6, DOC-1)."""

    def test_the_setup_page_lists_every_field_of_init_json(self, run_nerve: RunNerve) -> None:
        done = run_nerve("init", "--non-interactive", "--json")
        sentence = page_text(DOCS / "setup.md").split("`--json` prints the summary as JSON:")[1]
        listed = re.findall(r"`([a-z_]+)`", sentence.split(".\n", 1)[0])
        assert set(listed) - {"diff_command"} == set(json.loads(done.stdout))

    def test_the_troubleshooting_page_lists_doctors_json_fields(self, run_nerve: RunNerve) -> None:
        report = json.loads(run_nerve("doctor", "--offline", "--json").stdout)
        text = " ".join(page_text(DOCS / "troubleshooting.md").split())
        checks = ", ".join(f'"{key}"' for key in report["checks"][0])
        summary = ", ".join(f'"{key}"' for key in report["summary"])
        statuses = "|".join(("OK", "WARN", "ERR"))
        assert list(report) == ["schema", "status", "checks", "summary"]
        assert (
            f'{{"schema": {report["schema"]}, "status": "{statuses}", "checks": [{{{checks}}}]'
            in text
        )
        assert f'"summary": {{{summary}}}}}' in text


class TestCronPage:
    """docs/cron.md describes the built-in jobs as init writes them (TXT-6)."""

    @pytest.mark.parametrize("backend", ["memu", "loom"])
    def test_each_built_in_job_has_the_schedule_the_page_states(self, backend: str) -> None:
        system = REPO_ROOT / "golden" / backend / "personal" / "config" / "cron" / "system.yaml"
        jobs = {job["id"]: job for job in yaml.safe_load(page_text(system))["jobs"]}
        text = page_text(DOCS / "cron.md")
        for job_id, job in jobs.items():
            section = text.split(f"### `{job_id}`", 1)[1].split("\n#", 1)[0]
            assert f'(`"{job["schedule"]}"`)' in section
            if "context_rotate_hours" in job:
                assert f"`context_rotate_hours: {job['context_rotate_hours']}`" in section

    def test_a_worker_workspace_has_no_inbox_job_as_the_page_says(self) -> None:
        system = REPO_ROOT / "golden" / "memu" / "worker" / "config" / "cron" / "system.yaml"
        ids = [job["id"] for job in yaml.safe_load(page_text(system))["jobs"]]
        assert "memory-maintenance" in ids and "inbox-processor" not in ids
        assert "a worker workspace has no inbox job" in page_text(DOCS / "cron.md")


def _entries(text: str) -> list[str]:
    """The page's table rows and list items, each item with its continuation lines."""
    entries: list[str] = []
    for line in text.splitlines():
        if line.startswith("|") or line.startswith("- "):
            entries.append(line)
        elif line.startswith("  ") and entries and entries[-1].startswith("- "):
            entries[-1] += " " + line.strip()
    return entries


# --- imports the pages show -------------------------------------------------------------------

_IMPORTED = r"\w+(?: as \w+)?"
# `from provisioner… import a, b as c` or `(a, b)`, in a code block or a `python -c` line alike.
PACKAGE_IMPORT = re.compile(
    rf"(?<![\w.])from (?P<module>provisioner(?:\.\w+)*) import "
    rf"(?P<names>\([^)]*\)|{_IMPORTED}(?:, {_IMPORTED})*)"
    r"|(?<![\w.])import (?P<plain>provisioner(?:\.\w+)*)"
)


def package_imports(text: str) -> list[tuple[str, list[str]]]:
    """Each import of the package ``text`` shows: the module and the names taken from it."""
    found = []
    for match in PACKAGE_IMPORT.finditer(text):
        if match["plain"]:
            found.append((match["plain"], []))
            continue
        names = match["names"].strip("()").split(",")
        found.append((match["module"], [n.split(" as ")[0].strip() for n in names if n.strip()]))
    return found


def unresolved_imports(text: str) -> list[str]:
    """The modules and names ``text`` imports from the package that do not import."""
    broken = []
    for module_name, names in package_imports(text):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            broken.append(module_name)
            continue
        for name in names:
            if hasattr(module, name):
                continue
            try:
                importlib.import_module(f"{module_name}.{name}")
            except ImportError:
                broken.append(f"{module_name}.{name}")
    return broken


class TestImportsOnThePages:
    """Every import of the package a page shows runs as written (DOC-2)."""

    @pytest.mark.parametrize("path", every_doc(), ids=[p.name for p in every_doc()])
    def test_every_import_of_the_package_a_page_shows_imports(self, path: Path) -> None:
        broken = unresolved_imports(page_text(path))
        assert not broken, f"{path.name} imports {broken}, which do not import"

    def test_an_import_in_a_one_line_command_is_read(self) -> None:
        line = "python -c 'from provisioner.templating import texts; print(texts.all_texts)'"
        assert package_imports(line) == [("provisioner.templating", ["texts"])]

    def test_an_import_from_where_a_module_no_longer_is_is_found(self) -> None:
        line = "python -c 'from provisioner import texts; print(texts.memory_section)'"
        assert unresolved_imports(line) == ["provisioner.texts"]

    def test_names_in_parentheses_and_aliases_are_read(self) -> None:
        block = "from provisioner.runtime import (\n    LoomMemory,\n    Sweeper as S,\n)\n"
        assert package_imports(block) == [("provisioner.runtime", ["LoomMemory", "Sweeper"])]
