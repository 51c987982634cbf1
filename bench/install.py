"""`meshpilot install` of the default profile, to its control plane ready.

    python bench/install.py [--repeat 3] [--json bench/results/install.json]

Each run: a fresh store and CA dir, `meshpilot install -y` (one store write, `meshpilot
operator` started, the revision's discovery up and its record written: when the command
returns, the control plane is ready), then `uninstall --purge -y` (which stops the operator).
Reports the median and minimum wall time of the install alone (each run creates its CA,
as a first install on a machine does).
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

REPO = Path(__file__).resolve().parent.parent
MAIN = "from meshpilot.cli.main import main; main()"
IOP = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec: {profile: default}\n"


def _meshpilot(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "-c", MAIN, *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)  # fmt: skip


def one_install(env: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        iop = Path(tmp) / "iop.yaml"
        iop.write_text(IOP)
        where = ("--store", f"{tmp}/store", "--ca-dir", f"{tmp}/ca")
        start = time.perf_counter()
        try:
            _meshpilot(env, "install", "-f", str(iop), "-y", *where)
            return time.perf_counter() - start
        finally:
            _meshpilot(env, "uninstall", "--purge", "-y", *where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    times = [one_install(env) for _ in range(options.repeat)]
    result = {
        "case": "meshpilot install (default profile) to control plane ready",
        "runs": len(times),
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=2))
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        options.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
