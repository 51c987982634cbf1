"""`meshpilot apply|get|delete --store kube://CONTEXT` against the stand-in API server
(tests/kube_apiserver.py): the kubeconfig read by the kubernetes client's loader, Istio
objects at their real API group and version, writes by server-side apply with the field
manager `meshpilot`, a stale resourceVersion refused as a conflict, an invalid object
refused before anything reaches the server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_text
from meshpilot.store.kube.backend import KubeStore
from meshpilot.store.kube.target import parse_kube_url
from meshpilot.store.writes import ConflictError, InvalidObjectsError
from tests.kube_apiserver import KubeApiServer, kube_fixture  # noqa: F401

MESHPILOT = Path(sys.executable).parent / "meshpilot"
VS = """\
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - route:
    - destination: {host: ratings}
"""
RATINGS = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "ratings")


def url(kube: KubeApiServer) -> str:
    return f"kube://standin?kubeconfig={kube.kubeconfig}"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env={})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_apply_get_delete_through_the_kubeconfig(kube: KubeApiServer, tmp_path: Path) -> None:
    (tmp_path / "vs.yaml").write_text(VS)
    env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig)}

    def meshpilot(*args: str) -> tuple[int, str, str]:
        done = subprocess.run([str(MESHPILOT), *args], capture_output=True, text=True, env=env,
                              timeout=60)  # fmt: skip
        return done.returncode, done.stdout, done.stderr

    code, out, err = meshpilot("apply", "-f", str(tmp_path / "vs.yaml"), "--store", "kube://")
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings created\n"), err
    stored = kube.get("networking.istio.io/v1", "virtualservices", "default", "ratings")
    assert stored is not None and stored["spec"]["hosts"] == ["ratings"]
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["meshpilot"]
    patch = [r for r in kube.requests if r[0] == "PATCH"]
    assert patch[-1][2] == "application/apply-patch+yaml"
    assert patch[-1][1] == (
        "/apis/networking.istio.io/v1/namespaces/default/virtualservices/ratings"
        "?fieldManager=meshpilot&force=true"
    )
    assert meshpilot("apply", "-f", str(tmp_path / "vs.yaml"), "--store", "kube://standin")[1] == (
        "virtualservice.networking.istio.io/ratings unchanged\n"
    )
    code, out, _ = meshpilot("get", "vs", "-o", "name", "--store", "kube://standin")
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings\n")
    code, out, _ = meshpilot("get", "vs", "ratings", "-o", "yaml", "--store", "kube://")
    assert code == 0 and "hosts:\n  - ratings\n" in out and "resourceVersion: '103'" in out
    code, out, _ = meshpilot("delete", "vs", "ratings", "--store", "kube://standin")
    assert (code, out) == (0, 'virtualservice.networking.istio.io "ratings" deleted\n')
    assert kube.get("networking.istio.io/v1", "virtualservices", "default", "ratings") is None
    assert meshpilot("get", "vs", "-o", "name", "--store", "kube://")[1] == ""


def test_an_invalid_object_is_refused_before_the_server_sees_it(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    (tmp_path / "bad.yaml").write_text(VS.replace("hosts: [ratings]", "hosts: ratings"))
    code, out, err = run("apply", "-f", str(tmp_path / "bad.yaml"), "--store", url(kube))
    assert (code, out) == (1, "")
    assert "bad.yaml:5: error: VirtualService default/ratings: spec.hosts:" in err, err
    assert not [r for r in kube.requests if r[0] == "PATCH"]


def test_a_stale_resource_version_is_a_conflict(kube: KubeApiServer) -> None:
    store = KubeStore(parse_kube_url(url(kube)))
    store.apply(read_text(VS, "vs.yaml").documents)
    stale = VS.replace("namespace: default}", "namespace: default, resourceVersion: '7'}")
    with pytest.raises(ConflictError, match='on virtualservices "ratings": the object has been'):
        store.apply(read_text(stale, "vs.yaml").documents)
    with pytest.raises(InvalidObjectsError):
        store.apply(
            read_text(VS.replace("kind: VirtualService", "kind: VirtualServic"), "x").documents
        )
    assert store.get(RATINGS) is not None


@pytest.mark.parametrize(
    ("store_url", "message"),
    [
        (
            "kube://nowhere?kubeconfig=KC",
            "Error: kube://nowhere: Invalid kube-config file. Expected object with name nowhere",
        ),
        ("kube://standin?kubeconfig=KC&x=1", "unknown parameter 'x' (known: kubeconfig)"),
    ],
)
def test_a_bad_context_or_url_is_one_clear_line(
    kube: KubeApiServer, store_url: str, message: str
) -> None:
    code, out, err = run("get", "vs", "--store", store_url.replace("KC", str(kube.kubeconfig)))
    assert (code, out) == (1, "")
    assert message in err and "Traceback" not in err, err


def test_a_server_that_is_down_is_one_clear_line(kube: KubeApiServer) -> None:
    kube.stop()
    code, out, err = run("get", "vs", "--store", url(kube))
    assert (code, out) == (1, "")
    assert err.startswith(f"Error: kube://standin ({kube.url}): cannot reach the API server"), err


KINDS = """\
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: istio-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: argocd}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{port: 80, name: http}]
---
apiVersion: security.istio.io/v1beta1
kind: AuthorizationPolicy
metadata: {name: deny-all, namespace: shop}
spec: {}
---
apiVersion: telemetry.istio.io/v1alpha1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging: [{providers: [{name: envoy}]}]
"""


def test_each_kind_is_written_at_its_api_group_and_version(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    (tmp_path / "kinds.yaml").write_text(KINDS)
    argocd = Path(__file__).resolve().parents[3] / "examples" / "gitops" / "argocd"
    files = [tmp_path / "kinds.yaml", argocd / "project.yaml", argocd / "application.yaml"]
    code, out, err = run("apply", *[a for f in files for a in ("-f", str(f))], "--store", url(kube))
    assert code == 0, err
    patched = [u.partition("?")[0] for m, u, _ in kube.requests if m == "PATCH"]
    assert sorted(set(patched)) == [
        "/api/v1/namespaces/argocd",
        "/api/v1/namespaces/istio-system",
        "/api/v1/namespaces/shop",
        "/api/v1/namespaces/shop/services/web",
        "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/web",
        "/apis/argoproj.io/v1alpha1/namespaces/argocd/appprojects/mesh",
        "/apis/security.istio.io/v1/namespaces/shop/authorizationpolicies/deny-all",
        "/apis/telemetry.istio.io/v1/namespaces/istio-system/telemetries/mesh-default",
    ]
    # what a list returns (built-in kinds' items carry no apiVersion/kind) reads back whole
    code, out, _ = run("get", "svc", "-n", "shop", "-o", "name", "--store", url(kube))
    assert (code, out) == (0, "service/web\n")
    code, out, _ = run("get", "applications", "-n", "argocd", "-o", "name", "--store", url(kube))
    assert (code, out) == (0, "application.argoproj.io/web\n")


def test_no_kubeconfig_outside_a_cluster_is_one_clear_line(tmp_path: Path) -> None:
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "absent"), "HOME": str(tmp_path)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    done = subprocess.run([str(MESHPILOT), "get", "vs", "--store", "kube://"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("Error: kube://: no kubeconfig ("), done.stderr
    assert "and not in a cluster (" in done.stderr and "Traceback" not in done.stderr
