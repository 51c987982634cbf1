"""Config that Envoy cannot hold is refused where it is written (issue 18, item 8): the issue's
two cases through `meshpilot translate`, and durations parsed exactly up to Envoy's limit.
Every field's limit is in fixtures/envoy-ranges.yaml; the largest values Envoy takes are the
golden case limits-at-envoy-max, which tests/corpus feeds to real Envoy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from meshpilot.config.duration import parse_duration
from tests.conftest import REPO

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")
BOOKINFO = str(REPO / "examples" / "bookinfo")
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"

DR = """apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews-limits, namespace: default}
spec:
  host: reviews
  trafficPolicy:
    connectionPool:
      tcp:
        maxConnections: 1099511627776
"""
VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-timeout, namespace: default}
spec:
  hosts: [reviews]
  http:
  - timeout: 1000000000h
    route:
    - destination: {host: reviews}
"""


@pytest.mark.parametrize(
    ("text", "line", "where"),
    [
        (
            DR,
            9,
            "DestinationRule default/reviews-limits: spec.trafficPolicy.connectionPool.tcp."
            "maxConnections: 1099511627776 is out of range: must be in 0..2147483647 (int32)",
        ),
        (
            VS,
            7,
            "VirtualService default/reviews-timeout: spec.http[0].timeout: duration "
            "'1000000000h' is out of range: Envoy takes at most 9223372035s (about 292 years)",
        ),
    ],
    ids=["maxConnections", "timeout"],
)
def test_translate_names_the_field_and_serves_the_rest(
    tmp_path: Path, text: str, line: int, where: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = subprocess.run(
        [MESHPILOT, "translate", "-f", BOOKINFO, "-f", str(bad), "--proxy", PRODUCTPAGE],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert f"{bad}:{line}: error: {where}" in result.stderr.splitlines()
    assert result.returncode == 0
    clusters = {c["name"] for c in json.loads(result.stdout)["clusters"]}
    assert "outbound|9080||reviews.default.svc.cluster.local" in clusters


def test_durations_parse_exactly_up_to_what_envoy_takes() -> None:
    # A float would lose the milliseconds here (and validation then refuses the timeout).
    assert parse_duration("9223372035.999s") == 9_223_372_035_999_000_000
    assert parse_duration("9223372035.999999999s") == 9_223_372_035_999_999_999
    with pytest.raises(ValueError, match="out of range: Envoy takes at most 9223372035s"):
        parse_duration("9223372036s")
