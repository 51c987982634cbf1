"""IstioOperator and MutatingWebhookConfiguration as store kinds; a revision's view of a
shared store (Istio's istio.io/rev rule); a control plane publishing its webhook config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_text
from meshpilot.discovery.revision_view import RevisionView
from meshpilot.inject.webhook_store import publish_webhook
from meshpilot.security.control_plane_record import (
    ControlPlaneRecord,
    find_revision_record,
    write_record,
)
from meshpilot.store.directory import DirectoryStore
from meshpilot.store.writes import InvalidObjectsError

IOP = """apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
metadata: {name: canary, namespace: istio-system}
spec:
  profile: minimal
  revision: 1-15-4
"""

TAG = """apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: istio-revision-tag-prod
  labels: {istio.io/rev: 1-15-4, istio.io/tag: prod}
webhooks:
- name: rev.namespace.sidecar-injector.istio.io
  clientConfig: {service: {name: istiod-1-15-4, namespace: istio-system, path: /inject}}
  namespaceSelector:
    matchExpressions: [{key: istio.io/rev, operator: In, values: [prod]}]
"""


def _apply(store: DirectoryStore, text: str) -> None:
    store.apply(read_text(text, "test.yaml").documents)


def test_istio_operator_and_webhook_configuration_are_stored(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "s")
    _apply(store, IOP + "---\n" + TAG)
    iop = store.get(ConfigKey(Kind.ISTIO_OPERATOR, "istio-system", "canary"))
    assert iop is not None and iop.model.spec.revision == "1-15-4"
    # cluster-scoped, as in Kubernetes
    tag = store.get(ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", "istio-revision-tag-prod"))
    assert tag is not None and tag.model.webhooks[0].client_config.service.name == "istiod-1-15-4"


def test_bad_istio_operator_is_refused_naming_the_field(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "s")
    with pytest.raises(InvalidObjectsError) as err:
        _apply(store, IOP.replace("revision: 1-15-4", "revision: 1.15.4"))
    assert "spec.revision" in str(err.value) and "DNS-1123" in str(err.value)
    with pytest.raises(InvalidObjectsError) as err:
        _apply(store, TAG.replace("clientConfig", "clientConfg"))
    assert "clientConfg" in str(err.value)
    assert store.snapshot().objects == {}


SHARED = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: all, namespace: default}
spec: {hosts: [a], http: [{route: [{destination: {host: a}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: only-a, namespace: default, labels: {istio.io/rev: a}}
spec: {hosts: [a], http: [{route: [{destination: {host: a}}]}]}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: only-prod, namespace: default, labels: {istio.io/rev: prod}}
spec: {hosts: [a], http: [{route: [{destination: {host: a}}]}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: istio-a, namespace: istio-system, labels: {istio.io/rev: a}}
data: {mesh: "trustDomain: a.local\\n"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: istio-1-15-4, namespace: istio-system, labels: {istio.io/rev: 1-15-4}}
data: {mesh: "trustDomain: b.local\\n"}
---
apiVersion: v1
kind: Service
metadata: {name: a, namespace: default, labels: {istio.io/rev: a}}
spec: {ports: [{port: 80}]}
"""


def test_each_revision_sees_its_own_and_unlabelled_config(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "s")
    _apply(store, SHARED + "---\n" + TAG)
    names = {
        rev: {
            k.name
            for k in RevisionView(store, rev).snapshot().objects
            if k.kind.value in ("VirtualService", "Service")
        }
        for rev in ("a", "1-15-4")
    }
    # Kubernetes objects are seen by all; `prod` is a tag of 1-15-4
    assert names == {"a": {"all", "only-a", "a"}, "1-15-4": {"all", "only-prod", "a"}}
    assert RevisionView(store, "a").snapshot().mesh.trust_domain == "a.local"
    assert RevisionView(store, "1-15-4").snapshot().mesh.trust_domain == "b.local"


def test_control_plane_publishes_its_webhook_and_retargets_its_tags(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "s")
    _apply(store, TAG)
    written = publish_webhook(store, b"ROOT PEM", "1-15-4", "https://127.0.0.1:40001/inject")
    assert written == ["istio-sidecar-injector-1-15-4", "istio-revision-tag-prod"]
    for name in written:
        manifest = store.manifest(ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", name))
        assert manifest is not None
        client = manifest["webhooks"][0]["clientConfig"]
        assert client["url"] == "https://127.0.0.1:40001/inject"
        assert client["caBundle"] == "Uk9PVCBQRU0="
    tag = store.manifest(
        ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", "istio-revision-tag-prod")
    )
    assert tag is not None  # the tag keeps its own selectors
    assert tag["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["prod"]


def test_a_revisions_record_is_found_by_name_or_injected_address(tmp_path: Path) -> None:
    ca = tmp_path / "ca"
    for revision, port in (("1-15-4", 20010), ("default", 20020)):
        record = ControlPlaneRecord(os.getpid(), "127.0.0.1", port, port + 2,
                                    str(ca / f"root-{port}.pem"), revision=revision)  # fmt: skip
        write_record(ca, record, b"root")
    found = find_revision_record(ca, "istiod-1-15-4.istio-system.svc:15012")
    assert found is not None and found.xds_port == 20010
    default = find_revision_record(ca, "istiod.istio-system.svc:15012")
    assert default is not None and default.xds_port == 20020
    assert find_revision_record(ca, "1-14-3") is None
