"""The `meshpilot` command as a user runs it: output, messages and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")
BOOKINFO = str(REPO / "examples" / "bookinfo")
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"
INGRESS = "istio-ingressgateway-5d8f7b9c4-x2x7p.istio-system"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([MESHPILOT, *args], capture_output=True, text=True, check=False)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_translate_prints_the_five_sections_deterministically() -> None:
    first = run("translate", "-f", BOOKINFO, "--proxy", PRODUCTPAGE)
    assert first.returncode == 0, first.stderr
    config = json.loads(first.stdout)
    assert sorted(config) == ["clusters", "endpoints", "listeners", "routes", "secrets"]
    names = [c["name"] for c in config["clusters"]]
    assert names == sorted(names)
    assert "outbound|9080|v1|reviews.default.svc.cluster.local" in names
    assert run("translate", "-f", BOOKINFO, "--proxy", PRODUCTPAGE).stdout == first.stdout


def test_translate_router_yaml_redacts_private_keys() -> None:
    result = run("translate", "-f", BOOKINFO, "--proxy", INGRESS, "--type", "router", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    [secret] = config["secrets"]
    assert secret["name"] == "kubernetes://bookinfo-credential"
    assert secret["tls_certificate"]["private_key"] == {"inline_string": "[redacted]"}
    assert "PRIVATE KEY" not in result.stdout
    assert {lst["name"] for lst in config["listeners"]} == {"0.0.0.0_8080", "0.0.0.0_8443"}


def test_invalid_object_is_reported_and_the_rest_translates(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\n"
        "metadata: {name: broken, namespace: default}\nspec:\n  host: reviews\n"
        "  trafficPolicy:\n    loadBalancer: {simple: FASTEST}\n"
    )
    result = run("translate", "-f", BOOKINFO, "-f", str(bad), "--proxy", PRODUCTPAGE)
    assert result.returncode == 0
    assert f"{bad}:7: error: DestinationRule default/broken: " in result.stderr
    assert "outbound|9080|v1|reviews" in result.stdout
    strict = run("translate", "-f", BOOKINFO, "-f", str(bad), "--proxy", PRODUCTPAGE, "--strict")
    assert strict.returncode == 1


def test_analyze_reports_references_with_file_line_and_code(tmp_path: Path) -> None:
    vs = tmp_path / "vs.yaml"
    vs.write_text(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
        "metadata: {name: ratings-typo, namespace: default}\nspec:\n  hosts: [ratings.example]\n"
        "  http:\n  - route:\n    - destination: {host: ratingz}\n"
    )
    result = run("analyze", "-f", BOOKINFO, "-f", str(vs))
    assert result.returncode == 79  # istioctl's "analyzers found issues"
    assert (
        f"Error [IST0101] (VirtualService default/ratings-typo {vs}:8) "
        'Referenced host not found: "ratingz"'
    ) in result.stdout
    assert run("analyze", "-f", BOOKINFO).returncode == 0


def test_errors_are_one_line_not_tracebacks(tmp_path: Path) -> None:
    missing = run("translate", "-f", str(tmp_path / "nope.yaml"), "--proxy", PRODUCTPAGE)
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"Error: {tmp_path / 'nope.yaml'}: no such file or directory"
    unknown = run("translate", "-f", BOOKINFO, "--proxy", "ghost.default")
    assert unknown.returncode == 1 and "no Pod named 'ghost'" in unknown.stderr
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert run("analyze", "-f", str(binary)).returncode == 1
    assert run("translate").returncode == 2  # usage error
