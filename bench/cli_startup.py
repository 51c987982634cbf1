"""CLI start-up: wall time of `meshpilot --help`, `meshpilot version` and `translate` on bookinfo.

    python bench/cli_startup.py [--repeat 9] [--json bench/results/cli_startup.json]

Each command runs as a fresh process (the console script's own code: `meshpilot.cli.main:main`,
from this checkout's src/), --repeat times after one warm-up run that also writes the bytecode
cache, as an installed package would have it. Reports the median and minimum wall time and the
median CPU time (user + system, which a busy machine inflates less), next to the floor
measured in the same run: a bare `python -c pass`. The load average is printed too.
Targets (issue 19): --help and version <= 0.3 s, translate <= 1.0 s (wall).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAIN = "import sys; from meshpilot.cli.main import main; sys.argv[0] = 'meshpilot'; main()"
CASES: dict[str, tuple[list[str], float | None]] = {
    "python -c pass (floor)": (["-c", "pass"], None),
    "meshpilot --help": (["-c", MAIN, "--help"], 0.3),
    "meshpilot version": (["-c", MAIN, "version"], 0.3),
    "meshpilot translate bookinfo": (
        [
            "-c",
            MAIN,
            "translate",
            "-f",
            "examples/bookinfo/",
            "--proxy",
            "productpage-v1-6b746f74dc-9stvs.default",
        ],
        1.0,
    ),
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_times(args: list[str], repeat: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of each run, the warm-up left out."""
    walls, cpus = [], []
    for index in range(repeat + 1):
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run(
            [sys.executable, *args], cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL
        )
        if index:  # the first run is the warm-up
            walls.append(time.perf_counter() - start)
            cpus.append(_children_cpu() - cpu)
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    opts = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO / "src")
    results = {}
    print(f"load average before: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
    for name, (args, target) in CASES.items():
        times, cpus = run_times(args, opts.repeat, env)
        median, cpu = statistics.median(times), statistics.median(cpus)
        results[name] = {
            "median_s": median, "min_s": min(times), "cpu_median_s": cpu, "target_s": target
        }  # fmt: skip
        verdict = "" if target is None else ("  met" if median <= target else "  NOT met")
        bound = "" if target is None else f"  target <= {target:.1f} s"
        print(
            f"{name:30} wall median {median:.3f} s  min {min(times):.3f} s  "
            f"cpu median {cpu:.3f} s{bound}{verdict}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if opts.json:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
