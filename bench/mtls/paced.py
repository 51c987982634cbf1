"""Evenly paced open-loop load from h2load: one process per connection, phases staggered.

Why not `h2load -c 16 --rps 62.5`: all clients of one h2load process share one event loop
and their rate timers fire together, so "1000 rps over 16 connections" reaches the server
as a burst of 16 requests every 16 ms (93% of requests start within 50 us of the previous
one, measured in B6). Every request then queues behind up to 15 others in each Envoy of
the chain: with three single-worker Envoys on two cores that queueing is what the old B6
"two-hop" figure mostly measured. Neither `-r/--rate-period` nor `--timing-script-file`
breaks the lockstep inside one process. (istio/tools' perf runner drives nighthawk with
`--open-loop`.)

Here each connection is its own `h2load -c 1 --rps R/C`, so no two connections share a
timer. The C processes are launched one period-and-a-bit apart (`k * T * (1 + 1/C)`,
T = C / R) so that their starts do not contend; h2load's own start-up jitter (several ms)
then spreads their phases over the period. Phases are therefore random, not a perfect
1/R grid (a timing script per process was tried: h2load schedules each request after the
previous answer, so its period stretched by about the latency, 16.5 ms instead of 16).
What is achieved is measured, not assumed: `burst_share`, the share of requests started
within 50 us of the previous start, is reported with every run (0.94 in lockstep;
0.01-0.3 here, the upper end when h2load shares its CPU with a busy Envoy). A request whose
predecessor on its connection is still in flight waits (HTTP/1.1, one in flight): at
T = 16 ms that is rare and shows in p99 only.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.mtls.load import Load, RunResult, result_from_logs
from bench.mtls.netns import PodNet


def run_paced(pod: PodNet, url: str, load: Load, workdir: Path) -> RunResult:
    """`load.requests` requests at `load.rps`, paced as above; one log line per request."""
    workdir.mkdir(parents=True, exist_ok=True)
    period = load.connections / load.rps  # seconds between two requests of one connection
    per_conn = -(-load.requests // load.connections)  # ceiling
    logs = [workdir / f"paced-{k}.log" for k in range(load.connections)]
    procs = []
    started = time.monotonic()
    try:
        for k, log in enumerate(logs):
            log.unlink(missing_ok=True)
            # Phase k/C of the period, one period apart so the starts do not contend.
            time.sleep(
                max(0.0, started + k * period * (1 + 1 / load.connections) - time.monotonic())
            )
            argv = ["h2load", "--h1", "-c", "1", "-m", "1", "-n", str(per_conn)]
            argv += ["--rps", f"{1 / period:g}", "-H", f":authority: {load.host}"]
            argv += ["--log-file", str(log), url]
            procs.append(
                subprocess.Popen(
                    pod.argv(argv, load.cpus), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
            )
        failed = [p.stderr.read().decode() if p.wait() and p.stderr else "" for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()
    if any(failed) or not all(log.exists() for log in logs):
        raise RuntimeError(f"paced h2load failed: {[f for f in failed if f]}")
    return result_from_logs(logs, per_conn * load.connections)
