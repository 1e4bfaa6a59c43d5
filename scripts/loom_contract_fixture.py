"""Generate the Loom contract fixture from a Loom checkout (CON-1, BACK-4).

Nerve reaches Loom only through the ops, arguments and answer fields declared in
``NERVE_USAGE`` (and, for ``nerve memory migrate``'s write, ``OPERATOR_USAGE``; for the ops
reached through ``loom_op``, ``LOOM_OP_USAGE``; for what the Loom wording tells the agent to
send, ``AGENT_USAGE``) at the top of ``loom_contract/usage.py``. This script holds that
declaration up against a Loom checkout — its generated SDK's op schemas (``sdk/ops/<op>.json``)
and its MCP toolsets (``mcp/toolsets.yaml``), the layout of ``contracts/loom-ops.md`` — and
writes what it found to ``tests/fixtures/loom_lifecycle_ops.json`` (sections ``ops``,
``operator_ops``, ``loom_op_ops`` and ``agent_ops``): per op, the MCP tool that serves it
(``loom_op`` for the ops reached through it), the arguments Nerve sends with their fixed
values, the answer fields Nerve reads, and the op's own params and result schemas (the dev
gateway validates every call against them); plus Loom's default
(``core``) tool list and the ``loom_*`` tools the rendered Loom wording names. The runtime's
contract tests (CON-2) and the wording lint (BACK-4, GOLD-5) read that file; nobody types it by
hand. Written to its default place, it is written as well to the package's own copy
(``provisioner/templating/loom_lifecycle_ops.json``), which an installed package reads Loom's
tool lists from; a test keeps the two identical.

When the checkout and Nerve disagree (an op Loom keeps off MCP or serves only through
``loom_op``, an argument or field its schema does not declare, a fixed value it does not allow,
wording naming a tool outside ``core``) or the checkout is not laid out as expected, nothing is
written: the script prints one line on stderr saying what, where and what was expected, and exits
2. ``--check`` writes nothing either; it exits 1 with a short diff when the fixture on disk is not
what the checkout generates now, and 0 when it is.

Usage::

    python scripts/loom_contract_fixture.py --loom-checkout tests/fixtures/loom-checkout
    python scripts/loom_contract_fixture.py --loom-checkout ../loom --check

A path names a field inside a JSON value: names joined by ``.``, and ``[]`` after the name of a
list for the list's items (``messages[].role``, ``sections.memories.items[].text``).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

# The generator's parts live in the package beside this script (scripts/loom_contract/).
SCRIPTS_DIR = str(Path(__file__).resolve().parent)
if SCRIPTS_DIR not in sys.path:
    sys.path.insert(0, SCRIPTS_DIR)

from loom_contract.checkout import Refusal, load_checkout  # noqa: E402
from loom_contract.fixture import (  # noqa: E402
    GENERATOR,
    build_fixture,
    fixture_text,
    rendered_loom_wording,
    wording_tools,
)
from loom_contract.schema import requirements, schemas_at, validation_error  # noqa: E402
from loom_contract.usage import AGENT_USAGE, NERVE_USAGE, OpUsage  # noqa: E402

__all__ = [  # the names the tests reach through this script, and its entry points
    "AGENT_USAGE",
    "NERVE_USAGE",
    "OpUsage",
    "Refusal",
    "build_fixture",
    "generate",
    "load_checkout",
    "main",
    "requirements",
    "schemas_at",
    "validation_error",
    "wording_tools",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_RELATIVE = "tests/fixtures/loom_lifecycle_ops.json"  # CON-1
DEFAULT_OUT = REPO_ROOT / FIXTURE_RELATIVE
PACKAGED_OUT = REPO_ROOT / "provisioner" / "templating" / "loom_lifecycle_ops.json"  # BACK-4

EXIT_OK = 0
EXIT_STALE = 1  # --check: the fixture on disk differs from a fresh generation
EXIT_REFUSED = 2  # the checkout and Nerve disagree, or the checkout is not laid out as expected
DIFF_LINES_SHOWN = 40


def generate(checkout_root: Path) -> str:
    """The fixture text for the checkout at ``checkout_root``; ``Refusal`` on any disagreement.

    The checkout is checked before the wording is rendered, so a broken checkout fails fast.
    """
    checkout = load_checkout(checkout_root)
    build_fixture(checkout, {})
    return fixture_text(build_fixture(checkout, rendered_loom_wording()))


def stale_diff(out: Path, fresh: str) -> list[str] | None:
    """A unified diff from the fixture at ``out`` to ``fresh``, or None when they are equal."""
    try:
        current = out.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        current = ""
    if current == fresh:
        return None
    label = _display(out)
    return list(
        difflib.unified_diff(
            current.splitlines(keepends=True),
            fresh.splitlines(keepends=True),
            fromfile=f"{label} (on disk)",
            tofile=f"{label} (generated)",
        )
    )


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Generate tests/fixtures/loom_lifecycle_ops.json from a Loom checkout."
    )
    parser.add_argument("--loom-checkout", type=Path, required=True, help="a Loom checkout")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the fixture to write")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when --out is stale"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, or with ``--check`` compare; the exit status says how it went."""
    args = parse_args(argv)
    try:
        fresh = generate(args.loom_checkout)
    except Refusal as refusal:
        print(f"loom_contract_fixture: refused: {refusal}", file=sys.stderr)
        return EXIT_REFUSED
    if not args.check:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(fresh, encoding="utf-8")
        if args.out.resolve() == DEFAULT_OUT:
            PACKAGED_OUT.write_text(fresh, encoding="utf-8")
        return EXIT_OK
    diff = stale_diff(args.out, fresh)
    if diff is None:
        return EXIT_OK
    sys.stdout.writelines(diff[:DIFF_LINES_SHOWN])
    if len(diff) > DIFF_LINES_SHOWN:
        print(f"… {len(diff) - DIFF_LINES_SHOWN} more diff lines")
    regenerate = f"python {GENERATOR} --loom-checkout {args.loom_checkout}"
    if args.out.resolve() != DEFAULT_OUT:
        regenerate += f" --out {args.out}"
    print(
        f"loom_contract_fixture: {_display(args.out)} is stale; run {regenerate}", file=sys.stderr
    )
    return EXIT_STALE


if __name__ == "__main__":
    sys.exit(main())
