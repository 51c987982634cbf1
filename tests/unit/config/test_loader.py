"""Loading: bad input becomes diagnostics naming file, line, object and field; never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.config.diagnostics import Severity
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_paths, load_text
from meshpilot.errors import InputError

VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: default
spec:
  hosts: [reviews]
  http:
  - route:
    - destination:
        host: reviews
      weight: heavy
"""


def test_wrong_type_names_file_line_object_and_field() -> None:
    result = load_text(VS, "routing.yaml")
    assert result.objects == []
    [diag] = result.diagnostics
    assert (diag.file, diag.line) == ("routing.yaml", 12)
    assert diag.object_ref == "VirtualService default/reviews"
    assert diag.field == "spec.http[0].route[0].weight"
    assert str(diag).startswith(
        "routing.yaml:12: error: VirtualService default/reviews: spec.http[0].route[0].weight: "
    )


def test_unknown_field_is_an_error_and_the_rest_still_loads() -> None:
    text = (
        VS.replace("weight: heavy", "wieght: 100")
        + """\
---
apiVersion: v1
kind: Service
metadata: {name: reviews}
spec:
  ports: [{name: http, port: 9080}]
"""
    )
    result = load_text(text, "f.yaml")
    assert [o.key.kind for o in result.objects] == [Kind.SERVICE]
    assert result.objects[0].key.namespace == "default"  # kubectl's default namespace
    [diag] = result.errors
    assert diag.field == "spec.http[0].route[0].wieght"
    assert "unknown field 'wieght'" in diag.message


def test_malformed_yaml_reports_its_line() -> None:
    result = load_text("apiVersion: v1\nkind: Service\nmetadata: {name: x\n", "broken.yaml")
    [diag] = result.diagnostics
    assert diag.file == "broken.yaml" and diag.line >= 3
    assert diag.message.startswith("invalid YAML")


def test_unknown_kind_is_reported_and_ignored() -> None:
    result = load_text("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\n", "d.yaml")
    [diag] = result.diagnostics
    assert diag.severity is Severity.WARNING
    assert "unknown kind 'StatefulSet' ignored" in diag.message
    assert not result.objects


def test_unknown_kind_of_an_istio_api_group_is_an_error_naming_its_line() -> None:
    for group in ("networking", "security", "telemetry", "extensions"):
        text = f"# a typo\napiVersion: {group}.istio.io/v1\nkind: Sidecarr\nmetadata: {{name: s}}\n"
        result = load_text(text, "s.yaml")
        [diag] = result.diagnostics
        assert diag.severity is Severity.ERROR
        assert (diag.line, diag.field) == (2, "kind")  # the object starts after the comment
        assert diag.message == f"unknown kind 'Sidecarr' in Istio API group '{group}.istio.io'"
        assert not result.objects
    # Other groups that merely look like Istio's stay warnings.
    text = "apiVersion: install.istio.io/v1alpha1\nkind: IstioControlPlane\nmetadata: {name: i}\n"
    [diag] = load_text(text, "i.yaml").diagnostics
    assert diag.severity is Severity.WARNING


def test_api_versions_accepted_and_refused() -> None:
    for version in ("v1alpha3", "v1beta1", "v1"):
        ok = load_text(
            VS.replace("networking.istio.io/v1", f"networking.istio.io/{version}").replace(
                "weight: heavy", "weight: 100"
            ),
            "f.yaml",
        )
        assert len(ok.objects) == 1, version
    bad = load_text(VS.replace("networking.istio.io/v1", "networking.istio.io/v2"), "f.yaml")
    assert "apiVersion 'networking.istio.io/v2' is not accepted" in bad.diagnostics[0].message


def test_duplicate_objects_keep_the_first() -> None:
    one = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
    result = load_text(one + "---\n" + one, "ns.yaml")
    assert len(result.objects) == 1
    [diag] = result.diagnostics
    assert diag.line == 5 and "already defined at ns.yaml:1" in diag.message


def test_duplicate_key_is_reported() -> None:
    result = load_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\nkind: Namespace\n", "k.yaml"
    )
    assert any("duplicate key 'kind'" in d.message and d.line == 4 for d in result.diagnostics)


def test_list_kind_items_are_objects_with_their_own_lines() -> None:
    text = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: a}
- apiVersion: v1
  kind: Namespace
  metadata: {name: 1nvalid_name}
"""
    result = load_text(text, "list.yaml")
    assert [o.name for o in result.objects] == ["a"]
    assert result.diagnostics[0].line == 9 and result.diagnostics[0].field == "metadata.name"


def test_mesh_config_from_istio_configmap() -> None:
    text = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    trustDomain: example.org
    outboundTrafficPolicy: {mode: REGISTRY_ONLY}
    connectTimeout: 3s
    someFutureField: true
"""
    result = load_text(text, "cm.yaml")
    assert result.mesh.trust_domain == "example.org"
    assert result.mesh.outbound_traffic_policy.mode == "REGISTRY_ONLY"
    assert result.mesh.connect_timeout == 3_000_000_000
    [warning] = result.diagnostics
    assert warning.severity is Severity.WARNING and "someFutureField" in warning.message


def test_meshconfig_file_and_bad_duration(tmp_path: Path) -> None:
    (tmp_path / "meshconfig.yaml").write_text("trustDomain: td\nconnectTimeout: soon\n")
    result = load_paths([tmp_path])
    assert result.mesh.trust_domain == "cluster.local"  # invalid mesh config is not applied
    [diag] = result.errors
    assert diag.line == 2 and diag.field == "connectTimeout" and "invalid duration" in diag.message


def test_directories_are_read_recursively_in_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "ns.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n"
    )
    (tmp_path / "a.json").write_text(
        '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}'
    )
    (tmp_path / "notes.txt").write_text("not config")
    assert [o.name for o in load_paths([tmp_path]).objects] == ["a", "b"]


def test_missing_path_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no such file"):
        load_paths(["/nonexistent/mesh.yaml"])


@pytest.mark.parametrize(
    "text",
    [
        "- just\n- a list\n",
        "42\n",
        "apiVersion: v1\nkind: Service\n",
        "apiVersion: v1\nkind: Service\nmetadata: []\n",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: 3}\n",
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: null\n",
    ],
)
def test_odd_documents_give_diagnostics_not_exceptions(text: str) -> None:
    result = load_text(text, "odd.yaml")
    assert result.diagnostics and not result.objects
