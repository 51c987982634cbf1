"""Failover time of a proxy between discovery replicas, from the failover e2e's own
measurement (tests/e2e/test_etcd_failover.py): a three-member etcd on loopback, two
replicas, two gateway Envoys under continuous traffic; the replica serving one of them is
killed, and the time until both are served by the other is what the test prints
("proxies moved X s"), with the failed requests and the etcd leader's re-election time.

    python bench/failover.py [--runs 3] [--json out.json]

Target (issue 24): configured from the other replica within 5 s, no failed request.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
_LINE = re.compile(
    r"proxies moved (?P<moved>[0-9.]+) s .*etcd writes resumed (?P<resumed>[0-9.]+) s .*?"
    r"(?P<sent>[0-9]+) requests, (?P<failed>[0-9]+) failed"
)


def run_once() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "tests/e2e/test_etcd_failover.py"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    match = _LINE.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"the failover e2e failed:\n{done.stdout[-3000:]}")
    return {
        "moved_s": float(match["moved"]),
        "etcd_resumed_s": float(match["resumed"]),
        "requests": int(match["sent"]),
        "failed": int(match["failed"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs = [run_once() for _ in range(args.runs)]
    moved = [r["moved_s"] for r in runs]
    print(f"proxy failover: median {statistics.median(moved):.2f} s, max {max(moved):.2f} s over "
          f"{len(runs)} runs; {sum(r['requests'] for r in runs)} requests, "
          f"{sum(r['failed'] for r in runs)} failed")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
