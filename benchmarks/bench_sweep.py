"""Benchmark of the extraction sweep through the dev gateway (SWEEP-3, SWEEP-8).

    python benchmarks/bench_sweep.py [--scales 20000:200,100000:200,1000000:1] [--json]

The dev gateway (``nerve dev gateway --answers json``) runs in a process of its own on a
loopback port. Each scale ``MESSAGES:SESSIONS`` runs in a fresh child process, so its peak RSS
is the sweep's alone: the child fills a transcripts database, then sweeps it once through
``LoomMemory`` and reports

* gateway calls against the lower bound: per session, the larger of its message count over 100
  and its request bytes over 128 KiB (SWEEP-3), rounded up;
* wall time, and the sweep's own time per message: wall time minus the time during which at
  least one ``LoomMemory.extract`` was under way (encoding, HTTP, the gateway and the
  stand-in) — the sweep's work that no call's wait hides, as several windows run at once;
* peak RSS before the sweep (after the fill) and after it.

A last child plants one poison message (``fail-text``) in a session of 100 and counts the calls
until it is skipped (target: within 3 + 7 + 1).

Targets: calls equal to the lower bound; peak RSS grows by under 30 MB from 20k to 100k
messages and by under 50 MB for a million in one session.

    python benchmarks/bench_sweep.py --backlog [--loom scripted|gateway] [--limits 1,4]
                                     [--sessions 200] [--batches 5] [--call-s 1] [--json]

A backlog swept concurrently (SWEEP-14): SESSIONS sessions of BATCHES full batches each,
every extraction taking CALL-S seconds, swept once per limit in ``--limits`` (1: one session
at a time), first as it is and then with a fifth of the calls turned away with a 429, sweeping
again until every message is taken. ``--loom scripted`` (the default) is the test suite's
scripted Loom on a virtual clock, so a thousand seconds of waiting cost none;
``--loom gateway`` is ``nerve dev gateway --faults latency:CALL-S@…`` in real time. Reported:
the wall time (virtual for the scripted Loom), the calls against the lower bound, the sweeps it
took, and messages lost (never taken) or sent twice. Target: at a limit of 4, at most 0.3 of
the time a limit of 1 takes, the same calls, nothing lost; with the 429s, nothing lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
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
TURNED_AWAY = 0.2  # the scenario: a fifth of the calls answered 429
TURNED_AWAY_SEED = 20
SWEEPS_MAX = 60  # a backlog not taken within this many sweeps is reported as lost
EXTRACT_TOOL = "loom_memory_set_from_messages"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default=DEFAULT_SCALES)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("MESSAGES", "SESSIONS", "URL"))
    parser.add_argument("--poison-child", metavar="URL")
    parser.add_argument("--backlog", action="store_true", help="the concurrent sweep's scenario")
    parser.add_argument("--loom", choices=("scripted", "gateway"), default="scripted")
    parser.add_argument("--limits", default="1,4")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--call-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.backlog:
        limits = [int(limit) for limit in args.limits.split(",")]
        shape = Backlog(args.sessions, args.batches, args.call_s)
        return run_backlog(shape, limits, args.loom, as_json=args.json)
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

    def __init__(self, faults: str = "", seed: int = 0) -> None:
        self._command = [
            sys.executable, "-m", "provisioner", "dev", "gateway", "--port", "0",
            "--answers", "json", "--faults", faults, "--seed", str(seed),
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
    """``LoomMemory`` with the time during which an ``extract`` was under way added up.

    The sweep runs several sessions' windows at once (SWEEP-14), so calls overlap: what is
    added up is the time at least one call was in flight, never the sum of the calls' times,
    which can exceed the wall time (and made the sweep's own time come out negative).
    """

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.calls = 0
        self.spent_s = 0.0
        self._in_flight = 0
        self._busy_since = 0.0

    async def extract(self, messages: Any, **options: Any) -> Any:
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        try:
            return await self.memory.extract(messages, **options)
        finally:
            self.calls += 1
            self._in_flight -= 1
            if self._in_flight == 0:
                self.spent_s += time.perf_counter() - self._busy_since


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


# --- the backlog, swept concurrently (SWEEP-14) ------------------------------------------------


class Backlog:
    """``sessions`` sessions of ``batches`` full waiting-mode batches, ``call_s`` per call."""

    def __init__(self, sessions: int, batches: int, call_s: float) -> None:
        from provisioner.runtime.budget import WAITING_MAX_MESSAGES

        self.sessions = sessions
        self.batches = batches
        self.call_s = call_s
        self.per_session = batches * WAITING_MAX_MESSAGES

    @property
    def messages(self) -> int:
        return self.sessions * self.per_session

    @property
    def lower_bound(self) -> int:
        return self.sessions * self.batches

    def fill(self, path: Path) -> Any:
        from provisioner.runtime.transcripts import SqliteTranscripts

        transcripts = SqliteTranscripts(path)
        transcripts.add_messages(
            (f"s{index:04d}", "user" if n % 2 else "assistant", MESSAGE_TEXT.format(n=n),
             "2026-11-30T10:00:00+00:00")
            for index in range(self.sessions)
            for n in range(self.per_session)
        )  # fmt: skip
        return transcripts


def run_backlog(shape: Backlog, limits: list[int], loom: str, *, as_json: bool) -> int:
    results = []
    for turned_away in (0.0, TURNED_AWAY):
        for limit in limits:
            result = sweep_backlog(shape, limit, loom, turned_away)
            results.append(result)
            if not as_json:
                print(describe_backlog(result), flush=True)
    if as_json:
        print(json.dumps({"backlog": results}, indent=2))
    else:
        print(describe_ratio(results))
    return 0


def sweep_backlog(shape: Backlog, limit: int, loom: str, turned_away: float) -> dict[str, Any]:
    """Sweep a fresh copy of the backlog at ``limit`` until it is all taken (or SWEEPS_MAX)."""
    with tempfile.TemporaryDirectory() as folder:
        transcripts = shape.fill(Path(folder) / "t.sqlite3")
        try:
            if loom == "scripted":
                outcome = scripted_backlog(shape, limit, transcripts, Path(folder), turned_away)
            else:
                outcome = gateway_backlog(shape, limit, transcripts, Path(folder), turned_away)
        finally:
            transcripts.close()
    return {
        "limit": limit,
        "turned_away": turned_away,
        "loom": loom,
        "sessions": shape.sessions,
        "batches": shape.batches,
        "call_s": shape.call_s,
        "lower_bound": shape.lower_bound,
        **outcome,
    }


class ScriptedBacklogLoom:
    """The tests' ``FakeLoom`` (``testbed.loom``) behind ``call_s`` of (virtual) work per
    extraction; a share of the calls is turned away at once with a 429, drawn from a fixed
    seed, before any work is done (the fake's own faults come after its work)."""

    def __init__(self, call_s: float, turned_away: float) -> None:
        from testbed.loom import FakeLoom

        self.loom = FakeLoom(call_s=call_s)
        self.turned_away = turned_away
        self.draw = random.Random(TURNED_AWAY_SEED)
        self.calls = 0

    @property
    def peak(self) -> int:
        """The most calls Loom was working on at once."""
        return self.loom.peak

    async def extract(self, messages: Any, **options: Any) -> Any:
        from provisioner.runtime.gateway.errors import MayPass

        self.calls += 1
        if self.draw.random() < self.turned_away:
            raise MayPass("rate limited", retry_after_s=1.0)
        return await self.loom.extract(messages, **options)


def scripted_backlog(
    shape: Backlog, limit: int, transcripts: Any, folder: Path, turned_away: float
) -> dict[str, Any]:
    from provisioner.runtime.state import StateStore
    from testbed.virtual_time import VirtualTimeLoop

    memory = ScriptedBacklogLoom(shape.call_s, turned_away)
    with StateStore(folder / "s.sqlite3") as state:
        loop = VirtualTimeLoop()
        started = time.perf_counter()
        try:
            sweeps = loop.run_until_complete(sweep_until_taken(memory, transcripts, state, limit))
            wall_s = loop.time()
        finally:
            loop.close()
        own_s = time.perf_counter() - started
        lost = left_behind(transcripts, state)
    taken = memory.loom.taken
    return {
        "calls": memory.calls,
        "sweeps": sweeps,
        "wall_s": wall_s,
        "own_s": own_s,
        "lost": lost,
        "sent_twice": sum(1 for times in taken.values() if times > 1),
        "peak_in_flight": memory.peak,
    }


def gateway_backlog(
    shape: Backlog, limit: int, transcripts: Any, folder: Path, turned_away: float
) -> dict[str, Any]:
    from provisioner.config.loader import load_config
    from provisioner.runtime.loom.backend import LoomMemory
    from provisioner.runtime.state import StateStore

    faults = f"latency:{shape.call_s:g}@{EXTRACT_TOOL}"
    if turned_away:
        faults += f",429@{EXTRACT_TOOL}={turned_away:g}"

    async def sweeps(state: Any, url: str) -> tuple[int, int]:
        config_dir = folder / "cfg"
        config_dir.mkdir(exist_ok=True)
        (config_dir / "config.local.yaml").write_text(
            f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n", encoding="utf-8"
        )
        config = load_config(config_dir, None, env={})
        async with LoomMemory.from_config(config, state=state) as memory:
            timed = TimedMemory(memory)
            return await sweep_until_taken(timed, transcripts, state, limit), timed.calls

    gateway = dev_gateway(faults=faults, seed=TURNED_AWAY_SEED)
    with gateway as url, StateStore(folder / "s.sqlite3") as state:
        started = time.perf_counter()
        count, calls = asyncio.run(sweeps(state, url))
        wall_s = time.perf_counter() - started
        lost = left_behind(transcripts, state)
    return {"calls": calls, "sweeps": count, "wall_s": wall_s, "lost": lost, "sent_twice": None}


async def sweep_until_taken(memory: Any, transcripts: Any, state: Any, limit: int) -> int:
    """Sweep until no window is left behind (a 429 stops a window until the next sweep)."""
    from provisioner.runtime.sweep.sweeper import Sweeper

    sweeper = Sweeper(memory, transcripts, state, concurrency=limit)
    for count in range(1, SWEEPS_MAX + 1):
        await sweeper.run_once()
        if not left_behind(transcripts, state):
            return count
    return SWEEPS_MAX


def left_behind(transcripts: Any, state: Any) -> int:
    """Messages after each session's watermark: what no sweep has taken yet."""
    return sum(
        len(transcripts.messages_after(session, state.watermark(session), 10**6))
        for session in transcripts.sessions()
    )


def describe_backlog(result: dict[str, Any]) -> str:
    head = f"limit {result['limit']}, {result['turned_away']:.0%} turned away: "
    clock = "virtual" if result["loom"] == "scripted" else "real"
    own = f", the sweep's own {result['own_s']:.1f} s" if "own_s" in result else ""
    return head + (
        f"{result['calls']} calls (lower bound {result['lower_bound']}), "
        f"{result['sweeps']} sweep(s), wall {result['wall_s']:.0f} s {clock}{own}, "
        f"lost {result['lost']}, sent twice {result['sent_twice']}"
        + (f", at most {result['peak_in_flight']} at once" if "peak_in_flight" in result else "")
    )


def describe_ratio(results: list[dict[str, Any]]) -> str:
    clean = {r["limit"]: r for r in results if not r["turned_away"] and "wall_s" in r}
    if 1 not in clean or len(clean) < 2:
        return "ratio to one at a time: needs limit 1 and another limit run"
    ratios = [
        f"limit {limit}: {result['wall_s'] / clean[1]['wall_s']:.2f}"
        for limit, result in sorted(clean.items())
        if limit != 1
    ]
    return "wall time against one at a time (target <= 0.30 at limit 4): " + ", ".join(ratios)


if __name__ == "__main__":
    os.environ.setdefault("NO_PROXY", "*")
    sys.exit(main())
