"""Benchmark of ``nerve-provisioner fleet`` at fleet size (FLEET-5).

    python benchmarks/bench_fleet.py [--size 1000] [--sample 20] [--jobs 4] [--json]

Builds ``--size`` instances (a workspace and its configuration folder each), half on memU and
half on Loom, provisioned by ``fleet update`` in this process, and edits AGENTS.md in one in
ten of them the way an agent would (a line of its own). Beside them it builds as many again
whose every instance has its own agent and user names (``init --data`` in this process), as
real instances do. Then, each as a real process whose wall time and peak RSS are measured
(``wait4``):

* ``fleet check`` of the whole inventory;
* ``fleet check`` of the fleet with distinct answers, and its time against the first's;
* ``init --check`` per workspace: ``--sample`` of them (at most one in five) run as processes,
  one after another, and their mean time multiplied by ``--size`` (1,000 processes would take
  longer than the rest of the benchmark together; the figure printed is that extrapolation,
  and says so);
* after every configuration is switched to the other backend, ``fleet update`` of the whole
  inventory, and a ``fleet check`` afterwards that must find every workspace up to date.

Targets (FLEET-5), on 2 cores: ``fleet check`` at most 0.1× the ``init --check`` processes,
its RSS at most 200 MB; with distinct answers at most 2× the time with identical ones;
``fleet update`` after the switch at most 60 s.
``--size 10`` runs the whole path at smoke size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from provisioner.fleet.inventory import read_inventory  # noqa: E402
from provisioner.fleet.run import FleetRun  # noqa: E402
from provisioner.workspace.init import InitWorker  # noqa: E402
from provisioner.workspace.jinja_render import RenderCache  # noqa: E402

BACKENDS = ("memu", "loom")
EDITED_EVERY = 10  # FLEET-5: one in ten workspaces edited
SAMPLE_SHARE_MAX = 5  # at most one workspace in five gets an init --check process (smoke size)
TARGET_RATIO = 0.1  # FLEET-5: fleet check ≤ 0.1× the init --check processes
TARGET_RSS_MB = 200.0  # FLEET-5
TARGET_UPDATE_S = 60.0  # FLEET-5, on 2 cores
TARGET_DISTINCT_RATIO = 2.0  # FLEET-5: distinct answers at most 2× identical ones
AGENT_LINE = "Agent's own note: answer in short paragraphs.\n\n"
EDIT_BEFORE = "| File | What it holds |\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000, help="workspaces in the fleet")
    parser.add_argument("--sample", type=int, default=20, help="init --check processes run")
    parser.add_argument("--jobs", type=int, default=4, help="the fleet's worker threads")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as scratch:
        root = Path(scratch)
        env = {key: value for key, value in os.environ.items() if not key.startswith("NERVE_")}
        env.update({"HOME": str(root / "home"), "PYTHONPATH": str(REPO)})
        (root / "home").mkdir()
        inventory = build_fleet(root, args.size)
        started = time.perf_counter()
        provisioned = FleetRun(update=True, jobs=args.jobs, env=env).all(read_inventory(inventory))
        setup_s = time.perf_counter() - started
        assert all(o.status == "up_to_date" for o in provisioned), "the fleet was not provisioned"
        edit_agents(root, args.size)
        jobs = ("--jobs", str(args.jobs))
        check_s, check_rss, check_status = run_process(
            ["fleet", "check", "--inventory", str(inventory), "--json", *jobs], env
        )
        if check_status != 0:
            raise SystemExit(f"fleet check of the fresh fleet exited {check_status}; expected 0")
        distinct = build_distinct_fleet(root / "distinct", args.size, env)
        distinct_s, distinct_rss, distinct_status = run_process(
            ["fleet", "check", "--inventory", str(distinct), "--json", *jobs], env
        )
        if distinct_status != 0:
            raise SystemExit(f"fleet check of the named fleet exited {distinct_status}; expected 0")
        sample = min(args.sample, max(1, args.size // SAMPLE_SHARE_MAX))
        init_times = [
            run_process(init_check(root, index), env)[0] for index in spread(args.size, sample)
        ]
        processes_s = sum(init_times) / len(init_times) * args.size
        switch_backends(root, args.size)
        update_s, update_rss, update_status = run_process(
            ["fleet", "update", "--inventory", str(inventory), "--json", *jobs], env
        )
        after_s, _rss, after_status = run_process(
            ["fleet", "check", "--inventory", str(inventory), *jobs], env
        )
    results = {
        "size": args.size,
        "jobs": args.jobs,
        "setup_update_in_process_s": setup_s,
        "fleet_check_s": check_s,
        "fleet_check_rss_mb": check_rss,
        "init_check_processes_sampled": sample,
        "init_check_process_mean_s": processes_s / args.size,
        "init_check_processes_extrapolated_s": processes_s,
        "check_ratio": check_s / processes_s,
        "fleet_check_distinct_answers_s": distinct_s,
        "fleet_check_distinct_answers_rss_mb": distinct_rss,
        "distinct_over_identical": distinct_s / check_s,
        "fleet_update_after_switch_s": update_s,
        "fleet_update_rss_mb": update_rss,
        "fleet_update_status": update_status,
        "fleet_check_after_update_s": after_s,
        "fleet_check_after_update_status": after_status,
        "targets": {
            "check_ratio_max": TARGET_RATIO,
            "rss_mb_max": TARGET_RSS_MB,
            "distinct_over_identical_max": TARGET_DISTINCT_RATIO,
            "update_s_max": TARGET_UPDATE_S,
        },
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_results(results)
    return 0 if update_status == 0 and after_status == 0 else 1


def build_fleet(root: Path, size: int) -> Path:
    """``size`` instance folders, half memU and half Loom, and their inventory."""
    lines = []
    for index in range(size):
        configure(root / f"i{index}" / "config", BACKENDS[index % 2])
        lines.append(f"- {{workspace: i{index}/ws, config_dir: i{index}/config, create: true}}\n")
    inventory = root / "fleet.yaml"
    inventory.write_text("".join(lines), encoding="utf-8")
    return inventory


def build_distinct_fleet(root: Path, size: int, env: dict[str, str]) -> Path:
    """``size`` instances as ``build_fleet``'s, each provisioned by an init in this process
    with an agent and a user name of its own, one in ten edited, and their inventory."""
    inventory = build_fleet(root, size)
    renders = RenderCache()
    for index in range(size):
        folder = root / f"i{index}"
        InitWorker(
            workspace=folder / "ws",
            config_dir=folder / "config",
            mode="non-interactive",
            data={"agent_name": f"Agent {index}", "user_name": f"Person {index}"},
            env=env,
            renderer=renders,
        ).run()
    edit_agents(root, size)  # as in the fleet it is compared with
    return inventory


def configure(folder: Path, backend: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(f"memory:\n  backend: {backend}\n", encoding="utf-8")


def edit_agents(root: Path, size: int) -> None:
    """One workspace in ten: a line of the agent's own in AGENTS.md."""
    for index in range(0, size, EDITED_EVERY):
        agents = root / f"i{index}" / "ws" / "AGENTS.md"
        text = agents.read_text(encoding="utf-8")
        agents.write_text(text.replace(EDIT_BEFORE, AGENT_LINE + EDIT_BEFORE, 1), "utf-8")


def switch_backends(root: Path, size: int) -> None:
    """Every instance's configuration names the other backend."""
    for index in range(size):
        configure(root / f"i{index}" / "config", BACKENDS[(index + 1) % 2])


def spread(size: int, count: int) -> list[int]:
    """``count`` indexes spread over the fleet, edited and unedited, memU and Loom alike."""
    return sorted({index * size // count for index in range(count)})


def init_check(root: Path, index: int) -> list[str]:
    folder = root / f"i{index}"
    return ["init", "--check", "--workspace", str(folder / "ws"), "--config-dir",
            str(folder / "config")]  # fmt: skip


def run_process(arguments: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB and exit status of ``python -m provisioner ARGS``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "provisioner", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    _pid, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    process.returncode = code
    assert process.stderr is not None
    errors = process.stderr.read().decode("utf-8", "replace")
    process.stderr.close()
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(arguments[:2])} exited {code}: {errors.strip()[-400:]}")
    return elapsed, usage.ru_maxrss / 1024, code


def print_results(results: dict) -> None:
    size = results["size"]
    print(f"fleet of {size} workspaces (half memU, half Loom, one in ten edited), "
          f"{results['jobs']} worker threads")  # fmt: skip
    print(f"  provisioned in-process by fleet update: {results['setup_update_in_process_s']:.1f} s")
    print(
        f"  fleet check:                 {results['fleet_check_s']:.2f} s, "
        f"RSS {results['fleet_check_rss_mb']:.0f} MB"
    )
    print(
        f"  init --check processes:      {results['init_check_processes_extrapolated_s']:.1f} s "
        f"(extrapolated: {results['init_check_processes_sampled']} run, mean "
        f"{results['init_check_process_mean_s']:.3f} s, × {size})"
    )
    print(f"  check / processes:           {results['check_ratio']:.4f} (target ≤ {TARGET_RATIO})")
    print(
        f"  fleet check, distinct names: {results['fleet_check_distinct_answers_s']:.2f} s, "
        f"RSS {results['fleet_check_distinct_answers_rss_mb']:.0f} MB"
    )
    print(
        f"  distinct / identical:        {results['distinct_over_identical']:.2f} "
        f"(target ≤ {TARGET_DISTINCT_RATIO})"
    )
    print(
        f"  fleet update after a switch: {results['fleet_update_after_switch_s']:.2f} s, "
        f"RSS {results['fleet_update_rss_mb']:.0f} MB, exit {results['fleet_update_status']} "
        f"(target ≤ {TARGET_UPDATE_S:.0f} s)"
    )
    print(
        f"  fleet check afterwards:      {results['fleet_check_after_update_s']:.2f} s, "
        f"exit {results['fleet_check_after_update_status']}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
