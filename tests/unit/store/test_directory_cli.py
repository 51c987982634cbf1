"""`meshpilot apply`, `get` and `delete` on the live store, as a user sees them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from meshpilot.cli.main import cli

VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  gateways: [bookinfo-gateway]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 80
    - destination: {host: reviews, subset: v2}
      weight: 20
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec:
  host: reviews
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
"""


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), env={"MESHPILOT_STORE": str(tmp_path / "live")})
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_apply_get_delete(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "vs.yaml").write_text(VS)
    code, out, _ = run("apply", "-f", str(tmp_path / "in" / "vs.yaml"))
    assert (code, out) == (
        0,
        "virtualservice.networking.istio.io/reviews created\n"
        "destinationrule.networking.istio.io/reviews created\n",
    )
    code, out, _ = run("apply", "-f", str(tmp_path / "in"))
    assert out.splitlines() == [
        "virtualservice.networking.istio.io/reviews unchanged",
        "destinationrule.networking.istio.io/reviews unchanged",
    ]
    code, out, _ = run("get", "vs")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "GATEWAYS", "HOSTS", "AGE"]
    assert row.split()[:3] == ["reviews", '["bookinfo-gateway"]', '["reviews"]']
    code, out, _ = run("get", "destinationrules", "-A")
    assert out.splitlines()[1].split()[:3] == ["default", "reviews", "reviews"]
    code, out, _ = run("get", "virtualservice.networking.istio.io", "reviews", "-o", "yaml")
    obj = yaml.safe_load(out)
    assert obj["metadata"]["resourceVersion"] == "1" and obj["spec"]["hosts"] == ["reviews"]
    code, out, _ = run("delete", "vs", "reviews")
    assert (code, out) == (0, 'virtualservice.networking.istio.io "reviews" deleted\n')
    code, out, err = run("get", "vs", "reviews")
    assert code == 1
    assert (
        err
        == 'Error from server (NotFound): virtualservices.networking.istio.io "reviews" not found\n'
    )
    code, out, err = run("get", "vs")
    assert (code, out, err) == (0, "", "No resources found in default namespace.\n")
    code, out, _ = run("delete", "-f", str(tmp_path / "in"), "--ignore-not-found")
    assert out == 'destinationrule.networking.istio.io "reviews" deleted\n'


def test_invalid_object_is_refused_and_nothing_is_written(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = VS.replace("weight: 20", "weight: 20\n      headers: {request: {bad: 1}}")
    (tmp_path / "vs.yaml").write_text(bad.replace("subset: v2", "subset: v2}\n      weightt: 1 #"))
    code, out, err = run("apply", "-f", str(tmp_path / "vs.yaml"))
    assert code == 1 and out == ""
    assert (
        f"{tmp_path / 'vs.yaml'}:12: error: VirtualService default/reviews: "
        "spec.http[0].route[1].weightt: unknown field 'weightt'" in err
    )
    assert err.endswith("Error: nothing applied: fix the errors above\n")
    code, out, err = run("get", "dr")  # nothing written: not even the store was created
    assert (code, err) == (
        1,
        f"Error: no store at {tmp_path / 'live'}: nothing has been applied there yet\n",
    )


def test_dry_run_and_unknown_resource(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "vs.yaml").write_text(VS)
    code, out, _ = run("apply", "-f", str(tmp_path / "vs.yaml"), "--dry-run")
    assert out.splitlines()[0] == "virtualservice.networking.istio.io/reviews created (dry run)"
    assert not (tmp_path / "live").exists()
    (tmp_path / "dr.yaml").write_text(VS.split("---")[1])
    run("apply", "-f", str(tmp_path / "dr.yaml"))
    run("apply", "-f", str(tmp_path / "vs.yaml"), "--dry-run")
    assert run("get", "vs")[2] == "No resources found in default namespace.\n"
    code, _, err = run("get", "statefulsets")
    assert (code, err) == (1, 'Error: the server doesn\'t have a resource type "statefulsets"\n')


def test_store_flag_overrides_the_environment(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "vs.yaml").write_text(VS)
    other = tmp_path / "other"
    run("apply", "-f", str(tmp_path / "vs.yaml"), "--store", str(other))
    assert (other / "VirtualService" / "default" / "reviews.yaml").is_file()
    assert not (tmp_path / "live" / "VirtualService").exists()


MESH_CM = """apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    fooBar: 1
"""


def test_warnings_only_for_what_the_command_writes(tmp_path: Path) -> None:
    """A stored object's warning was shown when it was applied; later commands (that read
    the store) stay quiet about it."""
    exe = Path(sys.executable).parent / "meshpilot"
    (tmp_path / "cm.yaml").write_text(MESH_CM)
    (tmp_path / "vs.yaml").write_text(VS)
    store = str(tmp_path / "live")

    def meshpilot(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(exe), *args, "--store", store]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True)

    first = meshpilot("apply", "-f", str(tmp_path / "cm.yaml"))
    assert first.stderr.count("warning:") == 1
    assert first.stderr.startswith(f"{tmp_path / 'cm.yaml'}:5: warning: ")
    assert "fooBar" in first.stderr
    # the VS's own findings (its references are missing), not the stored ConfigMap's warning
    warned = meshpilot("apply", "-f", str(tmp_path / "vs.yaml")).stderr.splitlines()
    assert warned and all(w.startswith(f"Warning: {tmp_path / 'vs.yaml'}:") for w in warned)
    for args in (
        ("get", "virtualservices", "-n", "default"),
        ("gitops", "list"),
    ):
        assert meshpilot(*args).stderr == "", args
