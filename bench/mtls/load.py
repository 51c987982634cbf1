"""The load generator (h2load, HTTP/1.1, fixed rate) and what is read from each run.

h2load (Debian's nghttp2-client) runs in the client pod: `--h1`, C connections, each sending
`--rps` R/C requests per second, one request in flight per connection (`-m 1`), N requests.
Its `--log-file` gives one line per request (start in microseconds since epoch, status,
microseconds to the end of the response), from which the percentiles are computed; nothing
of Python is on the request path. This is the "burst" pacing: the C clients of one h2load
fire in lockstep (C requests at once every C / R seconds), see bench/mtls/paced.py for why
and for the evenly paced load B6 now reports.
"""

from __future__ import annotations

import itertools
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bench.mtls.netns import PodNet

_TICK = 100.0  # os.sysconf("SC_CLK_TCK") on Linux
BURST_GAP_US = 50  # two request starts closer than this count as one burst


@dataclass(frozen=True)
class Load:
    requests: int = 10000
    rps: float = 1000.0
    connections: int = 16
    cpus: str | None = None  # taskset list for h2load
    host: str = "api.shop.svc.cluster.local"  # the client sidecar routes by it


@dataclass(frozen=True)
class RunResult:
    latencies_us: list[int]
    errors: int  # non-200 answers and requests that never finished
    wall_s: float  # first request start to last response end
    burst_share: float = 0.0  # starts within 50 us of the previous start (bench/mtls/paced.py)

    def percentile(self, p: float) -> float:
        """Nearest-rank percentile in milliseconds."""
        ordered = sorted(self.latencies_us)
        rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
        return ordered[rank - 1] / 1000


def run_h2load(pod: PodNet, url: str, load: Load, log: Path) -> RunResult:
    log.unlink(missing_ok=True)
    argv = ["h2load", "--h1", "-n", str(load.requests), "-c", str(load.connections), "-m", "1"]
    argv += ["--rps", f"{load.rps / load.connections:g}", "-H", f":authority: {load.host}"]
    argv += ["--log-file", str(log), url]
    done = subprocess.run(pod.argv(argv, load.cpus), capture_output=True, text=True, check=False)
    if done.returncode != 0 or not log.exists():
        raise RuntimeError(f"h2load failed ({done.returncode}): {done.stdout}{done.stderr}")
    return result_from_logs([log], load.requests)


def result_from_logs(logs: list[Path], wanted: int) -> RunResult:
    """Latencies of the 200s; errors: non-200 and requests that never finished."""
    rows = []
    for log in logs:
        for line in log.read_text().splitlines():
            start, status, took = line.split("\t")[:3]
            rows.append((int(start), status == "200", int(took)))
    rows.sort()
    ok = [(start, took) for start, good, took in rows if good]
    wall = (max(s + t for s, t in ok) - ok[0][0]) / 1e6 if ok else 0.0
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(rows)]
    burst = sum(g < BURST_GAP_US for g in gaps) / len(gaps) if gaps else 0.0
    return RunResult([took for _, took in ok], max(0, wanted - len(ok)), wall, burst)


def wait_serving(pod: PodNet, url: str, log: Path, timeout: float = 60) -> None:
    """Until one request through `url` answers 200 (listeners, clusters and secrets ready)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if not run_h2load(pod, url, Load(requests=1, rps=100, connections=1), log).errors:
                return
        except RuntimeError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no 200 from {url} in {pod.netns} after {timeout}s")
        time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def admin_stats(admin_socket: Path, prefix: str) -> dict[str, int]:
    """Counters whose names contain `prefix`, from an Envoy admin on a Unix socket."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        sock.connect(str(admin_socket))
        request = f"GET /stats?filter={quote(prefix, safe='')} HTTP/1.1\r\nhost: admin\r\n"
        request += "connection: close\r\n\r\n"  # a short answer: one chunk
        sock.sendall(request.encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    out = {}
    for line in data.decode().split("\r\n\r\n", 1)[-1].splitlines():
        name, _, value = line.partition(": ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out
