"""Wall time of `nerve init` against `copier copy` of the same template, and of the golden check.

Each command runs as a whole process (interpreter start and imports included), five times;
the median is reported. Both start the same interpreter directly (``python -m``), so no
launcher script (a version manager's shim, say) is timed on one side only.

Targets (issue notes): init no slower than Copier itself on the same
template, and `nerve golden check` of everything under 2 s on 2 cores.

    python benchmarks/bench_init.py [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds one run of ``command`` takes; a failing run aborts the benchmark."""
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def median_of(runs: int, make_command, env: dict[str, str], cwd: Path) -> float:
    return statistics.median(timed(make_command(index), env, cwd) for index in range(runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nerve-bench-") as scratch:
        root = Path(scratch)
        (root / "home").mkdir()
        env = {**os.environ, "HOME": str(root / "home")}
        env.pop("CI", None)
        template = REPO_ROOT / "templates"
        results = {
            "nerve_init_s": median_of(
                args.runs,
                lambda i: [
                    sys.executable,
                    "-m",
                    "provisioner",
                    "init",
                    "--non-interactive",
                    "--workspace",
                    str(root / f"init-{i}"),
                ],
                env,
                root,
            ),
            "copier_copy_s": median_of(
                args.runs,
                lambda i: [
                    sys.executable,
                    "-m",
                    "copier",
                    "copy",
                    "--defaults",
                    "--trust",
                    "--quiet",
                    str(template),
                    str(root / f"copier-{i}"),
                ],
                env,
                root,
            ),
            "golden_check_s": median_of(
                args.runs,
                lambda i: [sys.executable, "-m", "provisioner", "golden", "check"],
                env,
                REPO_ROOT,
            ),
        }
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
