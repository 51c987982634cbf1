"""B6's load on an exact 1/R grid: bench/mtls/openloop.c, built here with the machine's C
compiler, run in the client pod like h2load.

Why: with one h2load per connection (paced.py) each process's phase is wherever its start-up
jitter put it, so how many requests arrive together changes from run to run (burst share
0.01-0.6 measured): rows that should match differ by up to 50% at p90 depending on that
draw alone. Here request i leaves at t0 + i/R on connection i % C: the same schedule for
every row and round.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from bench.mtls.load import Load, RunResult, result_from_logs
from bench.mtls.netns import PodNet

__all__ = ["build_openloop", "run_grid"]

SOURCE = Path(__file__).with_name("openloop.c")


def build_openloop(workdir: Path) -> Path:
    """Compile openloop.c into `workdir`; RuntimeError naming what is missing."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("--pacing grid needs a C compiler (apt-get install gcc)")
    binary = workdir / "openloop"
    subprocess.run([compiler, "-O2", "-o", str(binary), str(SOURCE)], check=True)
    return binary


def run_grid(pod: PodNet, binary: Path, url: str, load: Load, workdir: Path) -> RunResult:
    """`load.requests` requests at `load.rps` over `load.connections`, on the grid."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "grid.log"
    log.unlink(missing_ok=True)
    parts = urlsplit(url)
    argv = [str(binary), parts.hostname or "127.0.0.1", str(parts.port or 80), load.host]
    argv += [f"{load.rps:g}", str(load.connections), str(load.requests), str(log)]
    done = subprocess.run(pod.argv(argv, load.cpus), capture_output=True, timeout=600)
    if done.returncode != 0 or not log.exists():
        raise RuntimeError(f"openloop failed: {done.stderr.decode(errors='replace')}")
    return result_from_logs([log], load.requests)
