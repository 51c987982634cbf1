"""Envoy's access log as the ground truth of the live demo mesh: a mesh config that makes every
proxy write one JSON line per request to its stdout (the agent's log), and a reader that finds
a request's lines by its x-request-id.

Each line carries `%UPSTREAM_CLUSTER_RAW%` (the cluster's own name; `%UPSTREAM_CLUSTER%` gives
its alt_stat_name when the cluster has one), `%RESPONSE_CODE%`, `%RESPONSE_FLAGS%` and
`%RESPONSE_CODE_DETAILS%` (an RBAC denial names the policy there). A gateway treats its
downstream as external and gives the request a new x-request-id (Envoy's edge behaviour, as
in Istio), so requests through a gateway also carry `x-e2e-id`, logged as `tag`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from meshpilot.demo import pods as podlib
from meshpilot.demo.mesh import DemoMesh

__all__ = ["ACCESS_LOG_CONFIG", "LogLine", "find_lines", "lines_of"]

_FORMAT = {
    "request_id": "%REQ(X-REQUEST-ID)%",
    "tag": "%REQ(X-E2E-ID)%",
    "upstream_cluster": "%UPSTREAM_CLUSTER%",
    "upstream_cluster_raw": "%UPSTREAM_CLUSTER_RAW%",
    "response_code": "%RESPONSE_CODE%",
    "response_flags": "%RESPONSE_FLAGS%",
    "details": "%RESPONSE_CODE_DETAILS%",
    "authority": "%REQ(:AUTHORITY)%",
}

ACCESS_LOG_CONFIG = f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: istio, namespace: istio-system}}
data:
  mesh: |
    accessLogFile: /dev/stdout
    accessLogEncoding: JSON
    accessLogFormat: '{json.dumps(_FORMAT)}'
"""


def _text(value: Any) -> str:
    """Envoy writes an absent value as "-" (or null in JSON): both are ""."""
    return "" if value in (None, "-") else str(value)


@dataclass(frozen=True, slots=True)
class LogLine:
    pod: str
    request_id: str
    tag: str
    cluster: str
    code: int
    flags: str
    details: str
    authority: str

    @classmethod
    def parse(cls, pod: str, data: dict[str, Any]) -> LogLine:
        return cls(
            pod,
            _text(data.get("request_id")),
            _text(data.get("tag")),
            _text(data.get("upstream_cluster_raw")),
            int(data.get("response_code") or 0),
            _text(data.get("response_flags")),
            _text(data.get("details")),
            _text(data.get("authority")),
        )


def lines_of(mesh: DemoMesh, pod: str) -> list[LogLine]:
    """Every access log line the pod's proxy has written so far."""
    agent = podlib.agent_process(mesh.pods[pod])
    assert agent is not None, pod
    out = []
    for text in agent.log.read_text(errors="replace").splitlines():
        if not text.startswith("{") or '"request_id"' not in text:
            continue
        try:
            data = json.loads(text)
        except ValueError:
            continue
        out.append(LogLine.parse(pod, data))
    return out


def find_lines(
    mesh: DemoMesh, pods: list[str], ids: list[str], timeout: float = 15, each: int = 1
) -> dict[str, list[LogLine]]:
    """The lines of each request id over `pods`, waiting for Envoy to flush (it writes its
    access logs about once a second) until every id has at least `each` lines."""
    deadline = time.monotonic() + timeout
    while True:
        found: dict[str, list[LogLine]] = {i: [] for i in ids}
        for pod in pods:
            for line in lines_of(mesh, pod):
                key = line.tag if line.tag in found else line.request_id
                if key in found:
                    found[key].append(line)
        if all(len(v) >= each for v in found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.3)
