"""`meshpilot profile` and `meshpilot manifest` from the command line: output, exit codes,
and bad input answered with one clear line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from meshpilot.cli.main import cli


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_profile_list_dump_diff() -> None:
    listed = _run("profile", "list")
    assert listed.exit_code == 0
    assert listed.output.splitlines()[0] == "Istio configuration profiles:"
    assert "    demo" in listed.output.splitlines()
    dumped = yaml.safe_load(_run("profile", "dump", "demo").output)
    assert dumped["kind"] == "IstioOperator" and dumped["spec"]["profile"] == "demo"
    proxy = _run("profile", "dump", "--config-path", "values.global.proxy.resources")
    assert yaml.safe_load(proxy.output)["requests"] == {"cpu": "100m", "memory": "128Mi"}
    diff = _run("profile", "diff", "default", "minimal")
    assert diff.exit_code == 1 and "-    - enabled: true" in diff.output
    same = _run("profile", "diff", "default", "default")
    assert same.exit_code == 0 and "identical" in same.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("profile", "dump", "prod"),
            "Error: unknown profile 'prod'; valid profiles: default, demo, empty",
        ),
        (("profile", "dump", "ambient"), "Error: profile 'ambient' is not supported"),
        (("manifest", "generate", "--set", "values.pilot.traceSampling"), "expected PATH=VALUE"),
        (
            ("manifest", "generate", "--set", "compnents.pilot.enabled=true"),
            "spec.compnents: unknown field",
        ),
        (
            ("manifest", "generate", "--revision", "1.15.4"),
            "--revision: revision '1.15.4' is not a DNS-1123 label",
        ),
        (
            ("manifest", "generate", "-f", "/nonexistent/iop.yaml"),
            "cannot read /nonexistent/iop.yaml",
        ),
        (("manifest", "generate", "--component", "cni"), "component Cni is not supported"),
    ],
)
def test_bad_input_is_one_clear_error(args: tuple[str, ...], message: str) -> None:
    result = _run(*args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output and not isinstance(
        result.exception, (KeyError, TypeError, ValueError)
    )


def test_manifest_generate_and_diff(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text(
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: minimal\n"
    )
    b = tmp_path / "b.yaml"
    b.write_text(
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: default\n"
        "  components:\n    pilot:\n      k8s:\n        replicaCount: 2\n"
    )
    crds = _run("manifest", "generate", "-f", str(a), "--component", "base")
    assert crds.exit_code == 0
    kinds = {d["kind"] for d in yaml.safe_load_all(crds.output) if d}
    assert "Deployment" not in kinds and "CustomResourceDefinition" in kinds
    out = tmp_path / "a-manifest.yaml"
    out.write_text(_run("manifest", "generate", "-f", str(a)).output)
    same = _run("manifest", "diff", str(a), str(out))
    assert same.exit_code == 0 and "identical" in same.output
    diff = _run("manifest", "diff", str(a), str(b))
    assert diff.exit_code == 1
    assert f"Object Deployment:istio-system:istio-ingressgateway is missing in {a}" in diff.output
    assert "Object Deployment:istio-system:istiod has diffs:" in diff.output
    assert "+  replicas: 2" in diff.output


def test_generated_configmaps_drive_kube_inject(tmp_path: Path) -> None:
    generated = _run(
        "manifest",
        "generate",
        "--revision",
        "1-15-4",
        "--component",
        "pilot",
        "--set",
        "values.global.proxy.holdApplicationUntilProxyStarts=true",
    )
    assert generated.exit_code == 0, generated.output
    for doc in yaml.safe_load_all(generated.output):
        if doc and doc["kind"] == "ConfigMap":
            (tmp_path / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default}\n"
        "spec:\n  containers: [{name: app, image: nginx}]\n"
    )
    injector = str(tmp_path / "istio-sidecar-injector-1-15-4.yaml")
    injected = _run(
        "kube-inject",
        "-f",
        str(pod),
        "--meshConfigFile",
        str(tmp_path / "istio-1-15-4.yaml"),
        "--injectConfigFile",
        injector,
        "--valuesFile",
        injector,
    )
    assert injected.exit_code == 0, injected.output
    out = yaml.safe_load(injected.output)
    assert [c["name"] for c in out["spec"]["containers"]] == ["istio-proxy", "app"]  # hold: first
    assert out["metadata"]["annotations"]["istio.io/rev"] == "1-15-4"
    assert "istiod-1-15-4.istio-system.svc:15012" in injected.output
