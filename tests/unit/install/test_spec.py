"""The IstioOperator model: what it accepts, and every refusal naming the field path."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.install.spec import IstioOperatorError, parse_operator


def _error(spec: dict[str, Any]) -> str:
    with pytest.raises(IstioOperatorError) as info:
        parse_operator({"spec": spec}, "iop.yaml")
    return str(info.value)


def test_a_full_spec_is_typed() -> None:
    op = parse_operator(
        {
            "apiVersion": "install.istio.io/v1alpha1",
            "kind": "IstioOperator",
            "metadata": {"name": "default-istiocontrolplane", "namespace": "istio-system"},
            "spec": {
                "profile": "minimal",
                "revision": "1-15-4",
                "meshConfig": {"enableTracing": True},
                "values": {
                    "global": {
                        "proxy": {"tracer": "datadog", "holdApplicationUntilProxyStarts": True}
                    },
                    "pilot": {"traceSampling": 100.0},
                },
                "components": {
                    "pilot": {
                        "k8s": {
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "256Mi"},
                                "limits": {"cpu": "100m", "memory": "256Mi"},
                            },
                            "replicaCount": 2,
                            "env": [{"name": "A", "value": 1}],
                        }
                    },
                    "ingressGateways": [
                        {"name": "istio-ingressgateway", "enabled": True, "label": {"x": "y"}}
                    ],
                },
            },
        }
    )
    assert op.revision == "1-15-4"
    assert op.spec.mesh_config.enable_tracing is True
    assert op.spec.values.pilot is not None and op.spec.values.pilot.trace_sampling == 100.0
    pilot = op.spec.components.pilot.k8s
    assert pilot.replica_count == 2 and pilot.env[0].value == "1"
    assert op.spec.components.ingress_gateways[0].label == {"x": "y"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"components": {"pilot": {"k8s": {"replicaCount": "two"}}}},
            "iop.yaml: spec.components.pilot.k8s.replicaCount: Input should be a valid integer",
        ),
        (
            {"components": {"pilot": {"k8s": {"replicas": 2}}}},
            "spec.components.pilot.k8s.replicas: unknown field",
        ),
        (
            {"values": {"global": {"proxy": {"tracr": "x"}}}},
            "spec.values.global.proxy.tracr: unknown field",
        ),
        (
            {"values": {"global": {"proxy": {"tracer": "jaeger"}}}},
            "spec.values.global.proxy.tracer: must be one of",
        ),
        (
            {"values": {"pilot": {"traceSampling": 101}}},
            "spec.values.pilot.traceSampling: Input should be less than or equal to 100",
        ),
        (
            {
                "components": {
                    "ingressGateways": [
                        {"name": "gw", "k8s": {"resources": {"limits": {"cpu": "lots"}}}}
                    ]
                }
            },
            "spec.components.ingressGateways[name:gw].k8s.resources.limits: cpu: 'lots' is not a "
            "Kubernetes quantity",
        ),
        (
            {"components": {"cni": {"enabled": True}}},
            "spec.components.cni.enabled: the Istio CNI plugin is not supported",
        ),
        ({"revision": "1.15.4"}, "spec.revision: revision '1.15.4' is not a DNS-1123 label"),
        ({"revision": "Canary"}, "spec.revision: revision 'Canary' is not a DNS-1123 label"),
        ({"revision": "r" * 57}, "is longer than 56 characters: the Service istiod-<revision>"),
        (
            {"components": {"ingressGateways": [{"name": "1gw"}]}},
            "spec.components.ingressGateways[name:1gw].name: gateway name '1gw' is not a valid "
            "Service name",
        ),
        (
            {"components": {"ingressGateways": [{"name": "a"}, {"name": "a"}]}},
            "gateway names must be unique; repeated: a",
        ),
        (
            {"components": {"egressGateways": [{"enabled": True}]}},
            "spec.components.egressGateways[0].name: required field is missing",
        ),
        ({"istio": 1}, "spec.istio: unknown field"),
    ],
)
def test_bad_fields_are_named(spec: dict[str, Any], expected: str) -> None:
    assert expected in _error(spec)


def test_several_errors_one_per_line() -> None:
    message = _error({"hub": 1, "components": {"base": {"enabled": "maybe"}}})
    assert "\n  spec.components.base.enabled:" in message
    assert "\n  spec.hub:" in message
