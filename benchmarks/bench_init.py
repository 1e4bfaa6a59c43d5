"""Wall time of `nerve init` against `copier copy` of the same template, and of the golden check.

Each command runs as a whole process (interpreter start and imports included), nine times,
the three commands taking turns in a shuffled order; the median is reported. Both start the
same interpreter directly (``python -m``), so no
launcher script (a version manager's shim, say) is timed on one side only, and both run from
compiled bytecode, as an installed package does.

Targets (issue notes): init no slower than Copier itself on the same
template, and `nerve golden check` of everything under 2 s on 2 cores.

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


def timed(command: list[str], env: dict[str, str], cwd: Path, finished: tuple[int, ...]) -> float:
    """Seconds one run of ``command`` takes; a run that fails aborts the benchmark."""
    start = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=cwd, capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode not in finished:
        raise SystemExit(f"{command[2:4]} failed ({result.returncode}): {result.stderr[-500:]!r}")
    return elapsed


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
        order = list(commands)
        shuffler = random.Random(BENCH_SEED)
        for index in range(args.runs):
            # Interleaved, in a new order each round, so neither drift in machine load nor
            # running right after another process favours one command.
            shuffler.shuffle(order)
            for name in order:
                run = commands[name](index)
                samples[name].append(timed(run, env, cwd[name], FINISHED[name]))
        results = {name: statistics.median(values) for name, values in samples.items()}
    results["init_vs_copier"] = results["nerve_init_s"] / results["copier_copy_s"]
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"nerve init --non-interactive   median {results['nerve_init_s']:.3f} s")
        print(f"copier copy --defaults          median {results['copier_copy_s']:.3f} s")
        print(f"init / copier                   {results['init_vs_copier']:.2f}")
        print(f"nerve golden check              median {results['golden_check_s']:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
