"""`meshpilot kube-inject` as a user runs it: output, messages naming the field, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")
GOLDEN = Path(__file__).parent / "golden"
DEPLOYMENT = GOLDEN / "kind-deployment.yaml"


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [MESHPILOT, *args], capture_output=True, text=True, check=False, input=stdin
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_file_stdin_and_output_file(tmp_path: Path) -> None:
    by_file = run("kube-inject", "-f", str(DEPLOYMENT))
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stdout == (GOLDEN / "kind-deployment.yaml.injected").read_text()
    by_stdin = run("kube-inject", "-f", "-", stdin=DEPLOYMENT.read_text())
    assert by_stdin.stdout == by_file.stdout
    out = tmp_path / "injected.yaml"
    to_file = run("kube-inject", "-f", str(DEPLOYMENT), "-o", str(out))
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert out.read_text() == by_file.stdout


def test_json_output_and_skip_message() -> None:
    result = run(
        "kube-inject", "-f", str(GOLDEN / "policy-label-false.yaml"), "--output-format", "json"
    )
    assert result.returncode == 0, result.stderr
    pod = json.loads(result.stdout)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["app"]
    assert (
        "Skipping injection of Pod app/opt-out-label: sidecar.istio.io/inject=false"
        in result.stderr
    )


def test_config_maps_and_revision(tmp_path: Path) -> None:
    config_map = tmp_path / "injector.yaml"
    config_map.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "istio-sidecar-injector-canary"},
                "data": {
                    "config": "policy: enabled\ninjectedAnnotations: {a.example/b: c}\n",
                    "values": json.dumps(
                        {"global": {"proxy": {"holdApplicationUntilProxyStarts": True}}}
                    ),
                },
            }
        )
    )
    mesh = tmp_path / "mesh.yaml"
    mesh.write_text("trustDomain: corp.example\n")
    result = run(
        "kube-inject", "-f", str(DEPLOYMENT), "--revision", "canary",
        "--injectConfigFile", str(config_map), "--valuesFile", str(config_map),
        "--meshConfigFile", str(mesh),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    pod = yaml.safe_load(result.stdout)["spec"]["template"]
    proxy = pod["spec"]["containers"][0]
    assert proxy["name"] == "istio-proxy"  # the hold of the values
    env = {e["name"]: e.get("value") for e in proxy["env"]}
    assert env["CA_ADDR"] == "istiod-canary.istio-system.svc:15012"
    assert env["TRUST_DOMAIN"] == "corp.example"
    assert pod["metadata"]["annotations"]["a.example/b"] == "c"
    assert (
        json.loads(pod["metadata"]["annotations"]["sidecar.istio.io/status"])["revision"]
        == "canary"
    )


@pytest.mark.parametrize(
    ("option", "text", "message"),
    [
        (
            "--injectConfigFile",
            "policy: sometimes\n",
            "config.policy: Input should be 'enabled' or 'disabled'",
        ),
        ("--injectConfigFile", "polcy: enabled\n", "config.polcy: unknown field"),
        (
            "--injectConfigFile",
            "templates:\n  mine: '{{ .ObjectMeta.Name }}'\n",
            "config.templates.mine: custom injection templates are not supported",
        ),
        ("--injectConfigFile", "defaultTemplates: [grpc-agent]\n", "unknown template 'grpc-agent'"),
        (
            "--valuesFile",
            "global:\n  proxy:\n    statusPort: lots\n",
            "values.global.proxy.statusPort: Input should be a valid integer",
        ),
        (
            "--meshConfigFile",
            "defaultConfig:\n  drainDuration: soon\n",
            "defaultConfig.drainDuration",
        ),
        ("--meshConfigFile", "trustDomain: [a\n", "invalid YAML"),
    ],
)
def test_bad_config_is_refused_naming_the_field(
    tmp_path: Path, option: str, text: str, message: str
) -> None:
    path = tmp_path / "file.yaml"
    path.write_text(text)
    result = run("kube-inject", "-f", str(DEPLOYMENT), option, str(path))
    assert result.returncode == 1
    assert str(path) in result.stderr and message in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"inject.istio.io/templates": "grpc-agent"}, "unknown template 'grpc-agent'"),
        ({"proxy.istio.io/config": "concurrency: many"}, "proxy.istio.io/config: concurrency"),
        ({"proxy.istio.io/config": "[1, 2]"}, "must be a ProxyConfig mapping"),
        ({"sidecar.istio.io/interceptionMode": "TPROXY"}, "'TPROXY' is not supported"),
        ({"status.sidecar.istio.io/port": "http"}, "'http' is not a port number"),
    ],
)
def test_bad_pod_annotation_is_refused_naming_the_object(
    tmp_path: Path, annotations: dict[str, str], message: str
) -> None:
    doc = yaml.safe_load(DEPLOYMENT.read_text())
    doc["spec"]["template"]["metadata"]["annotations"] = annotations
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = run("kube-inject", "-f", str(path))
    assert result.returncode == 1
    assert "Deployment shop/deployment: " in result.stderr and message in result.stderr, (
        result.stderr
    )


def test_unreadable_and_invalid_input(tmp_path: Path) -> None:
    missing = run("kube-inject", "-f", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read input file" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: {name: [\n")
    result = run("kube-inject", "-f", str(broken))
    assert result.returncode == 1 and f"{broken}:" in result.stderr, result.stderr
