"""Benchmark of the extraction sweep through the dev gateway (SWEEP-3, SWEEP-8).

    python benchmarks/bench_sweep.py [--scales 20000:200,100000:200,1000000:1] [--json]

The dev gateway (``nerve dev gateway --answers json``) runs in a process of its own on a
loopback port. Each scale ``MESSAGES:SESSIONS`` runs in a fresh child process, so its peak RSS
is the sweep's alone: the child fills a transcripts database, then sweeps it once through
``LoomMemory`` and reports

* gateway calls against the lower bound: per session, the larger of its message count over 100
  and its request bytes over 128 KiB (SWEEP-3), rounded up;
* wall time, and the sweep's own time per message: wall time minus the time spent inside
  ``LoomMemory.extract`` (encoding, HTTP, the gateway and the stand-in);
* peak RSS before the sweep (after the fill) and after it.

A last child plants one poison message (``fail-text``) in a session of 100 and counts the calls
until it is skipped (target: within 3 + 7 + 1).

Targets: calls equal to the lower bound; peak RSS grows by under 30 MB from 20k to 100k
messages and by under 50 MB for a million in one session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_SCALES = "20000:200,100000:200,1000000:1"
MESSAGE_TEXT = "the user mentioned that the staging deploy runs every {n} minutes"
POISON = "POISON-BENCH"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default=DEFAULT_SCALES)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("MESSAGES", "SESSIONS", "URL"))
    parser.add_argument("--poison-child", metavar="URL")
    args = parser.parse_args(argv)
    if args.child:
        messages, sessions, url = args.child
        print(json.dumps(asyncio.run(run_scale(int(messages), int(sessions), url))))
        return 0
    if args.poison_child:
        print(json.dumps(asyncio.run(run_poison(args.poison_child))))
        return 0
    return run_all(args.scales, as_json=args.json)


def run_all(scales: str, *, as_json: bool) -> int:
    results = []
    with dev_gateway() as url:
        for scale in scales.split(","):
            messages, sessions = scale.split(":")
            results.append(child(["--child", messages, sessions, url]))
            if not as_json:
                print(describe(results[-1]), flush=True)
    with dev_gateway(faults=f"fail-text:{POISON}") as url:
        poison = child(["--poison-child", url])
    if as_json:
        print(json.dumps({"scales": results, "poison": poison}, indent=2))
    else:
        print(f"poison in a batch of 100: skipped after {poison['calls']} calls (target <= 11)")
    return 0


def describe(result: dict[str, Any]) -> str:
    return (
        f"{result['messages']:>9} messages / {result['sessions']:>3} sessions: "
        f"{result['calls']} calls (lower bound {result['lower_bound']}), "
        f"wall {result['wall_s']:.1f} s, sweep's own {result['own_us_per_message']:.1f} µs/msg, "
        f"peak RSS {result['rss_before_mb']:.1f} -> {result['rss_after_mb']:.1f} MB"
    )


class dev_gateway:
    """``nerve dev gateway`` in a child process; the context value is its base URL."""

    def __init__(self, faults: str = "") -> None:
        self._command = [
            sys.executable, "-m", "provisioner", "dev", "gateway", "--port", "0",
            "--answers", "json", "--faults", faults,
        ]  # fmt: skip

    def __enter__(self) -> str:
        self._process = subprocess.Popen(
            self._command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        return line.split(":", 1)[1].strip()

    def __exit__(self, *exc_info: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=30)


def child(arguments: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *arguments], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class TimedMemory:
    """``LoomMemory`` with the time spent inside ``extract`` added up."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.calls = 0
        self.spent_s = 0.0

    async def extract(self, messages: Any, **options: Any) -> Any:
        started = time.perf_counter()
        try:
            return await self.memory.extract(messages, **options)
        finally:
            self.calls += 1
            self.spent_s += time.perf_counter() - started


async def run_scale(messages: int, sessions: int, url: str) -> dict[str, Any]:
    from provisioner.runtime.budget import WAITING_MAX_BYTES, WAITING_MAX_MESSAGES
    from provisioner.runtime.sweep.batching import ENVELOPE_BYTES, wire_size
    from provisioner.runtime.transcripts import Message

    with tempfile.TemporaryDirectory() as folder:
        transcripts = fill(Path(folder) / "t.sqlite3", messages, sessions)
        per_session: dict[str, list[int]] = {}
        for n in range(messages):
            text = MESSAGE_TEXT.format(n=n)
            counts = per_session.setdefault(f"s{n % sessions}", [0, 0])
            counts[0] += 1
            counts[1] += wire_size(Message(0, "user", text, "2026-11-30T10:00:00+00:00"))
        room = WAITING_MAX_BYTES - ENVELOPE_BYTES - 8
        lower = sum(
            max(math.ceil(n / WAITING_MAX_MESSAGES), math.ceil(size / room))
            for n, size in per_session.values()
        )
        del per_session
        before = peak_rss_mb()
        timed, wall_s, report = await sweep(transcripts, Path(folder) / "s.sqlite3", url)
        transcripts.close()
    return {
        "messages": messages,
        "sessions": sessions,
        "calls": timed.calls,
        "lower_bound": lower,
        "taken": report.messages_taken,
        "wall_s": wall_s,
        "extract_s": timed.spent_s,
        "own_us_per_message": (wall_s - timed.spent_s) / messages * 1e6,
        "rss_before_mb": before,
        "rss_after_mb": peak_rss_mb(),
    }


def fill(path: Path, messages: int, sessions: int) -> Any:
    from provisioner.runtime.transcripts import SqliteTranscripts

    transcripts = SqliteTranscripts(path)
    transcripts.add_messages(
        (f"s{n % sessions}", "user" if n % 2 else "assistant", MESSAGE_TEXT.format(n=n),
         "2026-11-30T10:00:00+00:00")
        for n in range(messages)
    )  # fmt: skip
    return transcripts


async def sweep(transcripts: Any, state_path: Path, url: str) -> tuple[TimedMemory, float, Any]:
    from provisioner.config.loader import load_config
    from provisioner.runtime.loom.backend import LoomMemory
    from provisioner.runtime.state import StateStore
    from provisioner.runtime.sweep.sweeper import Sweeper

    config_dir = state_path.parent / "cfg"
    config_dir.mkdir()
    (config_dir / "config.local.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n", encoding="utf-8"
    )
    config = load_config(config_dir, None, env={})
    with StateStore(state_path) as state:
        async with LoomMemory.from_config(config, state=state) as memory:
            timed = TimedMemory(memory)
            started = time.perf_counter()
            report = await Sweeper(timed, transcripts, state).run_once()
            wall_s = time.perf_counter() - started
    return timed, wall_s, report


async def run_poison(url: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        transcripts = fill(Path(folder) / "t.sqlite3", 0, 1)
        for n in range(101):
            text = MESSAGE_TEXT.format(n=n) + (f" {POISON}" if n == 63 else "")
            transcripts.add_message("s0", "user", text, "2026-11-30T10:00:00+00:00")
        calls = 0
        for _ in range(3):
            timed, _wall, report = await sweep(transcripts, Path(folder) / "s.sqlite3", url)
            calls += timed.calls
            for cfg in Path(folder).glob("cfg"):
                for item in cfg.iterdir():
                    item.unlink()
                cfg.rmdir()
            if report.messages_skipped:
                break
        transcripts.close()
    return {"calls": calls, "skipped": report.messages_skipped}


if __name__ == "__main__":
    os.environ.setdefault("NO_PROXY", "*")
    sys.exit(main())
