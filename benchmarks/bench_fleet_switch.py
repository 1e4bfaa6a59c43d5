"""Benchmark of ``nerve-provisioner fleet switch --to loom`` at fleet size (FLEET-9).

    python benchmarks/bench_fleet_switch.py [--size 1000] [--items 30] [--sessions 5]
                                            [--messages 12] [--memorized 3]
                                            [--extract-s 1] [--write-s 0.005]
                                            [--turned-away 0.1] [--jobs N] [--json]

Builds ``--size`` instances on memU (``testbed.fleet_switch``): a workspace provisioned for
memU (one in ten with an agent's line in AGENTS.md), its configuration folder, and Nerve's
state folder with memU's store (``--items`` items) and ``nerve.db`` in Nerve's schema
(``--sessions`` sessions of ``--messages`` messages, memU's watermark halfway through the first
``--memorized`` of them). The Loom stand-in is ``nerve-provisioner dev gateway`` in a process of
its own on a loopback port, keeping its memories in a folder, with every extraction taking
``--extract-s`` seconds and every keyed write ``--write-s`` (its ``latency`` faults).

Then, twice on a fresh copy of the fleet — as it is, and with ``--turned-away`` of the
extractions answered 429 (``Retry-After: 1``) — ``fleet switch`` runs as one process, its wall
time and peak RSS measured (``wait4``), and the stand-in's store is read: every memU item must
be there once under its key, and every message after memU's watermark extracted, none of memU's
share, none twice.

Targets (FLEET-9), on 2 cores: each run at most 600 s and 500 MB of RSS, with nothing lost or
written twice. ``--size 3`` runs the whole path at smoke size. The exit status is 1 when a
target is missed or a count is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from testbed.fleet_switch import (  # noqa: E402
    Shape,
    build_instance,
    expected_swept,
    inventory,
    item_text,
    provision_template,
)

TARGET_S = 600.0  # FLEET-9, on 2 cores
TARGET_RSS_MB = 500.0  # FLEET-9
EDITED_EVERY = 10  # one workspace in ten with an agent's line
EXTRACT_TOOL = "loom_memory_set_from_messages"
WRITE_TOOL = "loom_memory_set"
STAND_IN_FILE = "loom-stand-in.sqlite3"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--items", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--messages", type=int, default=12)
    parser.add_argument("--memorized", type=int, default=3)
    parser.add_argument("--extract-s", type=float, default=1.0)
    parser.add_argument("--write-s", type=float, default=0.005)
    parser.add_argument("--turned-away", type=float, default=0.1)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument(
        "--loom-data",
        type=Path,
        default=None,
        help="folder for the stand-in's store (default: beside the fleet); a memory-backed "
        "one (/dev/shm) keeps the stand-in's own disk writes out of what is measured",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.loom_data is not None and not args.loom_data.is_dir():
        parser.error(f"--loom-data {args.loom_data}: no such folder; expected one to write in")
    shape = Shape(args.items, args.sessions, args.messages, args.memorized)
    latency = f"latency:{args.extract_s:g}@{EXTRACT_TOOL},latency:{args.write_s:g}@{WRITE_TOOL}"
    scenarios = [("as it is", latency)]
    if args.turned_away > 0:
        scenarios.append(
            (f"{args.turned_away:.0%} of extractions 429",
             f"429:1@{EXTRACT_TOOL}={args.turned_away:g},{latency}")
        )  # fmt: skip
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-switch-") as scratch:
        root = Path(scratch)
        env = {key: value for key, value in os.environ.items() if not key.startswith("NERVE_")}
        env.update({"HOME": str(root / "home"), "PYTHONPATH": str(REPO)})
        (root / "home").mkdir()
        started = time.perf_counter()
        fleet, names = build_fleet(root / "built", args.size, shape)
        build_s = time.perf_counter() - started
        for label, faults in scenarios:
            copy = root / "run"
            shutil.copytree(fleet, copy, symlinks=True)
            result = run_scenario(copy, names, shape, faults, env, args.jobs, args.loom_data)
            results.append({"scenario": label, "faults": faults, **result})
            if not args.json:
                print(describe(results[-1]), flush=True)
            shutil.rmtree(copy)
    ok = all(r["ok"] for r in results)
    if args.json:
        print(json.dumps({"size": args.size, "build_s": build_s, "runs": results}, indent=2))
    else:
        print(f"built {args.size} instances in {build_s:.1f} s; targets: "
              f"<= {TARGET_S:g} s, <= {TARGET_RSS_MB:g} MB, nothing lost or twice")  # fmt: skip
    return 0 if ok else 1


def build_fleet(root: Path, size: int, shape: Shape) -> tuple[Path, list[str]]:
    root.mkdir(parents=True)
    template = provision_template(root)
    names = [f"i{index:04d}" for index in range(size)]
    for index, name in enumerate(names):
        build_instance(root, template, name, shape, edited=index % EDITED_EVERY == 0)
    shutil.rmtree(template)
    inventory(root, names)
    return root, names


def run_scenario(
    fleet: Path,
    names: list[str],
    shape: Shape,
    faults: str,
    env: dict[str, str],
    jobs: int | None,
    loom_data: Path | None,
) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="bench-loom-", dir=loom_data or fleet.parent))
    with dev_gateway(faults, data, env) as url:
        command = ["fleet", "switch", "--inventory", str(fleet / "fleet.yaml"), "--to", "loom",
                   "--gateway", url, "--json"]  # fmt: skip
        if jobs is not None:
            command += ["--jobs", str(jobs)]
        wall_s, cpu_s, rss_mb, status, report = run_process(command, env)
    counts = read_stand_in(data / STAND_IN_FILE, names, shape)
    shutil.rmtree(data)
    summary = report.get("summary", {})
    ok = (
        status == 0
        and wall_s <= TARGET_S
        and rss_mb <= TARGET_RSS_MB
        and counts["memories_missing"] == 0
        and counts["messages_missing"] == 0
        and counts["messages_twice"] == 0
        and counts["memu_share_sent"] == 0
    )
    return {
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "load_1min": os.getloadavg()[0],
        "rss_mb": rss_mb,
        "exit_status": status,
        "switched": summary.get("switched", 0),
        **counts,
        "ok": ok,
    }


def read_stand_in(path: Path, names: list[str], shape: Shape) -> dict[str, int]:
    """What the stand-in holds against what the fleet had: memU's items by key, messages by
    text (every extraction's texts are logged, duplicates kept)."""
    db = sqlite3.connect(path)
    try:
        keys = {row[0] for row in db.execute("SELECT memory_key FROM memories")}
        texts = {row[0] for row in db.execute("SELECT text FROM memories")}
        extracted = Counter(row[0] for row in db.execute("SELECT text FROM extracted"))
    finally:
        db.close()
    items = [(f"memu-{name}-item-{n}", item_text(name, n)) for name in names
             for n in range(shape.items)]  # fmt: skip
    expected = expected_swept(names, shape)
    wanted = set(expected)
    return {
        "memories_expected": len(items),
        "memories_missing": sum(1 for key, text in items if key not in keys or text not in texts),
        "messages_expected": len(expected),
        "messages_missing": sum(1 for text in expected if not extracted[text]),
        "messages_twice": sum(1 for text in expected if extracted[text] > 1),
        "memu_share_sent": sum(1 for text in extracted if text not in wanted),
    }


class dev_gateway:
    """``nerve-provisioner dev gateway`` in a child process; the context value is its URL."""

    def __init__(self, faults: str, data: Path, env: dict[str, str]) -> None:
        self._command = [
            sys.executable, "-m", "provisioner", "dev", "gateway", "--port", "0",
            "--answers", "json", "--faults", faults, "--seed", "9", "--data", str(data),
        ]  # fmt: skip
        self._env = env

    def __enter__(self) -> str:
        self._process = subprocess.Popen(
            self._command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            cwd=REPO, env=self._env,
        )  # fmt: skip
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        return line.split(":", 1)[1].strip()

    def __exit__(self, *exc_info: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=30)


def run_process(arguments: list[str], env: dict[str, str]) -> tuple[float, float, float, int, dict]:
    """Wall seconds, CPU seconds, peak RSS in MB, exit status and JSON report of
    ``python -m provisioner``."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "provisioner", *arguments],
            stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=REPO,
        )  # fmt: skip
        _pid, status, usage = os.wait4(process.pid, 0)
        wall_s = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode("utf-8")
    report = json.loads(text) if text.strip() else {}
    cpu_s = usage.ru_utime + usage.ru_stime
    return wall_s, cpu_s, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), report


def describe(result: dict[str, Any]) -> str:
    return (
        f"fleet switch, {result['scenario']}: {result['wall_s']:.1f} s "
        f"({result['cpu_s']:.0f} s of CPU; load {result['load_1min']:.1f} at the end), peak RSS "
        f"{result['rss_mb']:.0f} MB, exit {result['exit_status']}, {result['switched']} switched; "
        f"memories {result['memories_expected'] - result['memories_missing']}"
        f"/{result['memories_expected']}, messages "
        f"{result['messages_expected'] - result['messages_missing']}/"
        f"{result['messages_expected']}, twice {result['messages_twice']}, memU's share sent "
        f"{result['memu_share_sent']}" + ("" if result["ok"] else "  <- target missed")
    )


if __name__ == "__main__":
    sys.exit(main())
