"""Time of `nerve init` against `copier copy` of the same template, and of the golden check.

Each command runs as a whole process (interpreter start and imports included), nine times,
the three commands taking turns in a shuffled order; the median wall time is reported, and
the median CPU time (the process and every process it waited for). Both start the
same interpreter directly (``python -m``), so no
launcher script (a version manager's shim, say) is timed on one side only, and both run from
compiled bytecode, as an installed package does.

Targets (issue notes): init at most 0.9 of the time Copier itself takes on the same
template, and `nerve golden check` of everything under 2 s on 2 cores. The machine's load
moves the wall times of both sides; the CPU times move less.

    python benchmarks/bench_init.py [--runs 9] [--json]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_SEED = 20261201  # a fixed shuffle, so two runs of the benchmark time the same order


# Exit statuses that count as a finished run: the golden check exits 1 when goldens drifted
# (a wording change in progress), which still times the whole check.
FINISHED = {"nerve_init_s": (0,), "copier_copy_s": (0,), "golden_check_s": (0, 1)}


def timed(
    command: list[str], env: dict[str, str], cwd: Path, finished: tuple[int, ...]
) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``command``; a run that fails aborts the benchmark.

    The CPU time is the process's own and that of every process it waited for (Copier's
    ``git`` calls, say), user and system together.
    """
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors
        )
        _pid, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        returncode = os.waitstatus_to_exitcode(status)
        process.returncode = returncode  # reaped here: Popen must not wait for it again
        if returncode not in finished:
            errors.seek(0)
            tail = errors.read()[-500:]
            raise SystemExit(f"{command[2:4]} failed ({returncode}): {tail!r}")
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-") as scratch:
        root = Path(scratch)
        (root / "home").mkdir()
        env = {**os.environ, "HOME": str(root / "home")}
        env.pop("CI", None)
        # pip compiles an installed package's bytecode, so Copier's is ready; compile ours too,
        # or a checkout would be timed compiling its own source on every run.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        compileall.compile_dir(REPO_ROOT / "provisioner", quiet=1)
        commands = {
            "nerve_init_s": lambda i: [
                *(sys.executable, "-m", "provisioner", "init", "--non-interactive"),
                *("--workspace", str(root / f"init-{i}")),
            ],
            "copier_copy_s": lambda i: [
                *(sys.executable, "-m", "copier", "copy", "--defaults", "--trust", "--quiet"),
                *(str(REPO_ROOT / "templates"), str(root / f"copier-{i}")),
            ],
            "golden_check_s": lambda i: [sys.executable, "-m", "provisioner", "golden", "check"],
        }
        cwd = {"nerve_init_s": root, "copier_copy_s": root, "golden_check_s": REPO_ROOT}
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        order = list(commands)
        shuffler = random.Random(BENCH_SEED)
        for index in range(args.runs):
            # Interleaved, in a new order each round, so neither drift in machine load nor
            # running right after another process favours one command.
            shuffler.shuffle(order)
            for name in order:
                run = commands[name](index)
                wall, used = timed(run, env, cwd[name], FINISHED[name])
                samples[name].append(wall)
                cpu[name].append(used)
        results = {name: statistics.median(values) for name, values in samples.items()}
        results.update(
            {
                name.removesuffix("_s") + "_cpu_s": statistics.median(values)
                for name, values in cpu.items()
            }
        )
    results["init_vs_copier"] = results["nerve_init_s"] / results["copier_copy_s"]
    results["init_vs_copier_cpu"] = results["nerve_init_cpu_s"] / results["copier_copy_cpu_s"]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for label, key in (
            ("nerve init --non-interactive", "nerve_init"),
            ("copier copy --defaults", "copier_copy"),
            ("nerve golden check", "golden_check"),
        ):
            print(
                f"{label:<30} median {results[key + '_s']:.3f} s, "
                f"CPU {results[key + '_cpu_s']:.3f} s"
            )
        print(
            f"{'init / copier':<30} {results['init_vs_copier']:.2f} "
            f"(CPU {results['init_vs_copier_cpu']:.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
