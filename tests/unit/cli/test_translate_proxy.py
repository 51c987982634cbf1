"""`translate --proxy` reads the proxy type from the pod, refuses an ambiguous pod, and names
the closest pods when the one asked for is not there."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from tests.conftest import REPO

BOOKINFO = str(REPO / "examples" / "bookinfo")
INGRESS = "istio-ingressgateway-5d8f7b9c4-x2x7p.istio-system"
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: edge
  namespace: default
  labels: {{app: edge{labels}}}
spec:
  containers:
  - name: istio-proxy
    args: [proxy, {proxy}, --domain, default.svc.cluster.local]
status: {{podIP: 10.10.9.9}}
"""


def translate(*args: str) -> Result:
    result = CliRunner().invoke(cli, ["translate", "-f", BOOKINFO, *args], prog_name="meshpilot")
    assert "Traceback" not in result.output
    return result


def listeners(result: Result) -> set[str]:
    assert result.exit_code == 0, result.output
    return {lst["name"] for lst in json.loads(result.stdout)["listeners"]}


def test_gateway_pod_gets_router_config_without_type() -> None:
    assert listeners(translate("--proxy", INGRESS)) == {"0.0.0.0_8080", "0.0.0.0_8443"}
    assert "virtualOutbound" in listeners(translate("--proxy", INGRESS, "--type", "sidecar"))


def test_proxy_router_container_args_make_a_router(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD.format(labels="", proxy="router"))
    assert "virtualOutbound" not in listeners(translate("-f", str(pod), "--proxy", "edge.default"))
    pod.write_text(POD.format(labels="", proxy="sidecar"))
    assert "virtualOutbound" in listeners(translate("-f", str(pod), "--proxy", "edge.default"))


def test_ambiguous_pod_is_refused_with_the_reasons(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD.format(labels=", istio: ingressgateway", proxy="sidecar"))
    result = translate("-f", str(pod), "--proxy", "edge.default")
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: cannot tell whether Pod default/edge runs a sidecar or a gateway (its "
        "container istio-proxy runs `proxy sidecar`; it has the label istio=ingressgateway); "
        "say which with --type sidecar or --type router\n"
    )
    explicit = translate("-f", str(pod), "--proxy", "edge.default", "--type", "router")
    assert "virtualOutbound" not in listeners(explicit)


def test_unknown_pod_lists_the_closest_pods() -> None:
    result = translate("--proxy", "reviews-v9.default")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "Error: --proxy reviews-v9.default: no Pod named 'reviews-v9' in namespace 'default' "
        "among the input objects; closest: reviews-v"
    )
    short = translate("--proxy", "productpage")
    assert short.stderr.rstrip().endswith("; closest: productpage-v1-6b746f74dc-9stvs.default")
