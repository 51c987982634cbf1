"""`manifest generate` as a user reads it: names, ports, selectors, overlays, order, and the
ConfigMaps read back by the control plane's and the injector's own loaders."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from meshpilot.config.loader import parse_mesh_config
from meshpilot.inject.config import injector_from_config_map
from meshpilot.install.crds import istio_crds
from meshpilot.install.load import OperatorFile, resolve
from meshpilot.install.manifest import manifest_objects
from meshpilot.install.spec import IstioOperatorError


def _objects(
    spec: dict[str, Any],
    sets: tuple[str, ...] = (),
    revision: str | None = None,
    component: str | None = None,
) -> list[dict[str, Any]]:
    return manifest_objects(
        resolve([OperatorFile("iop.yaml", {"name": "cp"}, spec)], sets, revision), component
    )


def _get(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (
        f"{kind} {name}: {[(o['kind'], o['metadata']['name']) for o in objects]}"
    )
    return found[0]


def test_revision_names_service_and_deployment() -> None:
    objects = _objects({}, revision="1-15-4")
    service = _get(objects, "Service", "istiod-1-15-4")
    assert service["spec"]["selector"] == {"app": "istiod", "istio.io/rev": "1-15-4"}
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("grpc-xds", 15010, 15010),
        ("https-dns", 15012, 15012),
        ("https-webhook", 443, 15017),
        ("http-monitoring", 15014, 15014),
    ]
    deployment = _get(objects, "Deployment", "istiod-1-15-4")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == "discovery"
    assert [*container["command"], *container["args"]][:2] == ["meshpilot", "discovery"]
    assert deployment["spec"]["template"]["metadata"]["labels"]["istio.io/rev"] == "1-15-4"
    for kind, name in (
        ("ConfigMap", "istio-1-15-4"),
        ("ConfigMap", "istio-sidecar-injector-1-15-4"),
        ("ServiceAccount", "istiod-1-15-4"),
        ("PodDisruptionBudget", "istiod-1-15-4"),
        ("HorizontalPodAutoscaler", "istiod-1-15-4"),
        ("ValidatingWebhookConfiguration", "istio-validator-1-15-4-istio-system"),
        ("ClusterRole", "istiod-clusterrole-1-15-4-istio-system"),
    ):
        assert _get(objects, kind, name)["metadata"]["labels"]["istio.io/rev"] == "1-15-4"
    webhook = _get(objects, "MutatingWebhookConfiguration", "istio-sidecar-injector-1-15-4")
    assert [w["name"] for w in webhook["webhooks"]] == [
        "rev.namespace.sidecar-injector.istio.io",
        "rev.object.sidecar-injector.istio.io",
    ]
    assert webhook["webhooks"][0]["clientConfig"]["service"]["name"] == "istiod-1-15-4"
    assert webhook["webhooks"][0]["namespaceSelector"]["matchExpressions"][0] == {
        "key": "istio.io/rev",
        "operator": "In",
        "values": ["1-15-4"],
    }


def test_default_revision_has_plain_names_and_legacy_webhooks() -> None:
    objects = _objects({})
    _get(objects, "Deployment", "istiod")
    webhook = _get(objects, "MutatingWebhookConfiguration", "istio-sidecar-injector")
    assert len(webhook["webhooks"]) == 4
    assert webhook["webhooks"][2]["namespaceSelector"]["matchExpressions"] == [
        {"key": "istio-injection", "operator": "In", "values": ["enabled"]}
    ]


def test_configmaps_load_in_the_control_plane_and_injector() -> None:
    objects = _objects(
        {
            "profile": "demo",
            "values": {"global": {"proxy": {"holdApplicationUntilProxyStarts": True}}},
        },
        ("values.sidecarInjectorWebhook.injectedAnnotations.team=mesh",),
        revision="canary",
    )
    mesh_data = _get(objects, "ConfigMap", "istio-canary")["data"]["mesh"]
    mesh, problems = parse_mesh_config(yaml.safe_load(mesh_data))
    assert mesh is not None and not [p for p in problems if p[2] == "error"]
    assert mesh.access_log_file == "/dev/stdout"
    assert mesh.default_config.discovery_address == "istiod-canary.istio-system.svc:15012"
    data = _get(objects, "ConfigMap", "istio-sidecar-injector-canary")["data"]
    injector = injector_from_config_map(data, mesh, name="istio-sidecar-injector-canary")
    assert injector.revision == "canary" and injector.warnings == ()
    assert injector.values.global_.proxy.hold_application_until_proxy_starts is True
    assert injector.config.injected_annotations == {"team": "mesh"}


def test_overlays_reach_the_objects() -> None:
    objects = _objects(
        {
            "components": {
                "pilot": {
                    "k8s": {
                        "replicaCount": 3,
                        "env": [{"name": "PILOT_TRACE_SAMPLING", "value": "5"}],
                        "hpaSpec": {"minReplicas": 2, "maxReplicas": 7},
                    }
                },
                "ingressGateways": [
                    {
                        "name": "istio-ingressgateway",
                        "k8s": {
                            "service": {
                                "type": "NodePort",
                                "ports": [
                                    {
                                        "name": "http2",
                                        "port": 80,
                                        "targetPort": 8080,
                                        "nodePort": 30080,
                                    }
                                ],
                            },
                            "podAnnotations": {"a": "b"},
                            "resources": {"requests": {"cpu": "1"}},
                        },
                    }
                ],
            },
            "values": {"pilot": {"traceSampling": 50}},
        }
    )
    istiod = _get(objects, "Deployment", "istiod")
    assert istiod["spec"]["replicas"] == 3
    env = istiod["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e["value"] for e in env if e["name"] == "PILOT_TRACE_SAMPLING"] == ["5"]  # overlay wins
    hpa = _get(objects, "HorizontalPodAutoscaler", "istiod")["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 7)
    service = _get(objects, "Service", "istio-ingressgateway")["spec"]
    assert service["type"] == "NodePort" and service["ports"][0]["nodePort"] == 30080
    gateway = _get(objects, "Deployment", "istio-ingressgateway")["spec"]["template"]
    assert gateway["metadata"]["annotations"]["a"] == "b"
    assert gateway["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}, "limits": {}}


def test_order_for_apply_and_components() -> None:
    objects = _objects({"profile": "demo"})
    kinds = [o["kind"] for o in objects]
    assert set(kinds[: len(istio_crds())]) == {"CustomResourceDefinition"}
    pilot = [
        o["kind"]
        for o in objects
        if o["metadata"]["labels"].get("operator.istio.io/component") == "Pilot"
    ]
    assert pilot.index("ConfigMap") < pilot.index("Deployment") < pilot.index("Service")
    assert pilot[-1] == "Service" and pilot.index("ServiceAccount") < pilot.index("RoleBinding")
    base = _objects({}, component="base")
    assert {o["kind"] for o in base} == {
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
    }
    assert {
        o["metadata"]["name"]
        for o in _objects({}, component="IngressGateways")
        if o["kind"] == "Deployment"
    } == {"istio-ingressgateway"}
    assert _objects({"profile": "empty"}) == []
    with pytest.raises(IstioOperatorError, match="unknown component 'gw'; components: Base, Pilot"):
        _objects({}, component="gw")
    with pytest.raises(IstioOperatorError, match=r"neither values\.istiodRemote\.injectionURL"):
        _objects({"profile": "remote"})


def test_crd_schemas_take_what_meshpilot_takes() -> None:
    crd = next(
        c for c in istio_crds() if c["metadata"]["name"] == "virtualservices.networking.istio.io"
    )
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha3", "v1beta1", "v1"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    good = {
        "spec": {
            "hosts": ["r"],
            "http": [
                {
                    "timeout": "5s",
                    "route": [
                        {"destination": {"host": "r", "port": {"number": 80}}, "weight": 100}
                    ],
                }
            ],
        }
    }
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError, match="'5' is not of type 'integer'"):
        jsonschema.validate({"spec": {"http": [{"route": [{"weight": "5"}]}]}}, schema)
    names = {c["metadata"]["name"] for c in istio_crds()}
    assert {
        "gateways.networking.istio.io",
        "serviceentries.networking.istio.io",
        "istiooperators.install.istio.io",
        "authorizationpolicies.security.istio.io",
    } <= names


def test_component_namespace_and_images() -> None:
    objects = _objects(
        {
            "hub": "registry.local/mesh",
            "components": {
                "pilot": {"namespace": "mesh-system", "tag": "1.15.4"},
                "ingressGateways": [{"name": "istio-ingressgateway", "namespace": "istio-ingress"}],
            },
            "values": {"global": {"proxy": {"image": "registry.local/other/proxy:9"}}},
        }
    )
    istiod = _get(objects, "Deployment", "istiod")
    assert istiod["metadata"]["namespace"] == "mesh-system"
    assert (
        istiod["spec"]["template"]["spec"]["containers"][0]["image"]
        == "registry.local/mesh/pilot:1.15.4"
    )
    gateway = _get(objects, "Deployment", "istio-ingressgateway")
    assert gateway["metadata"]["namespace"] == "istio-ingress"
    container = gateway["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.local/other/proxy:9"
    assert "--discovery-address=istiod.mesh-system.svc:15012" in container["args"]
