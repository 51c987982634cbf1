"""The built-in install profiles: base IstioOperator specs the user's spec is merged over.

Contents follow Istio's `manifests/profiles/*.yaml` (seed spec §9.1), with meshpilot's own
image tag. `ambient` is known and refused: it needs ztunnel and the CNI node agent, which
meshpilot does not have.
"""

from __future__ import annotations

import copy
from typing import Any

from meshpilot import __version__
from meshpilot.install.spec import IstioOperatorError

__all__ = ["PROFILES", "UNSUPPORTED_PROFILES", "profile_spec"]


def _resources(cpu: str, memory: str, limits: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        out["limits"] = {"cpu": "2000m", "memory": "1024Mi"}
    return out


def _gateway(name: str, enabled: bool) -> dict[str, Any]:
    return {"name": name, "enabled": enabled}


_DEFAULT: dict[str, Any] = {
    "hub": "docker.io/istio",
    "tag": __version__,
    "meshConfig": {"defaultConfig": {"proxyMetadata": {}}, "enablePrometheusMerge": True},
    "components": {
        "base": {"enabled": True},
        "pilot": {"enabled": True},
        "ingressGateways": [_gateway("istio-ingressgateway", True)],
        "egressGateways": [_gateway("istio-egressgateway", False)],
        "cni": {"enabled": False},
        "istiodRemote": {"enabled": False},
    },
    "values": {
        "global": {
            "istioNamespace": "istio-system",
            "imagePullPolicy": "",
            "jwtPolicy": "third-party-jwt",
            "pilotCertProvider": "istiod",
            "sds": {"token": {"aud": "istio-ca"}},
            "logging": {"level": "default:info"},
            "defaultPodDisruptionBudget": {"enabled": True},
            "proxy": {
                "image": "proxyv2",
                "resources": _resources("100m", "128Mi"),
                "logLevel": "warning",
                "componentLogLevel": "misc:error",
                "statusPort": 15020,
                "readinessInitialDelaySeconds": 1,
                "readinessPeriodSeconds": 2,
                "readinessFailureThreshold": 30,
                "includeIPRanges": "*",
                "excludeIPRanges": "",
                "autoInject": "enabled",
                "tracer": "zipkin",
                "clusterDomain": "cluster.local",
                "holdApplicationUntilProxyStarts": False,
                "privileged": False,
            },
            "proxy_init": {"image": "proxyv2", "resources": _resources("10m", "10Mi")},
        },
        "pilot": {
            "autoscaleEnabled": True,
            "autoscaleMin": 1,
            "autoscaleMax": 5,
            "replicaCount": 1,
            "traceSampling": 1.0,
            "image": "pilot",
            "resources": {"requests": {"cpu": "500m", "memory": "2048Mi"}},
            "cpu": {"targetAverageUtilization": 80},
            "configMap": True,
            "env": {},
        },
        "sidecarInjectorWebhook": {
            "enableNamespacesByDefault": False,
            "rewriteAppHTTPProbe": True,
            "injectedAnnotations": {},
            "neverInjectSelector": [],
            "alwaysInjectSelector": [],
            "defaultTemplates": ["sidecar"],
        },
        "gateways": {
            "istio-ingressgateway": {"autoscaleEnabled": True, "type": "LoadBalancer"},
            "istio-egressgateway": {"autoscaleEnabled": True, "type": "ClusterIP"},
        },
        "telemetry": {"enabled": True, "v2": {"enabled": True, "prometheus": {"enabled": True}}},
    },
}

_INGRESS_PORTS = [
    {"port": 15021, "targetPort": 15021, "name": "status-port"},
    {"port": 80, "targetPort": 8080, "name": "http2"},
    {"port": 443, "targetPort": 8443, "name": "https"},
    {"port": 31400, "targetPort": 31400, "name": "tcp"},
    {"port": 15443, "targetPort": 15443, "name": "tls"},
]
_EGRESS_PORTS = [
    {"port": 80, "targetPort": 8080, "name": "http2"},
    {"port": 443, "targetPort": 8443, "name": "https"},
    {"port": 15443, "targetPort": 15443, "name": "tls"},
]

_DEMO: dict[str, Any] = {
    "meshConfig": {
        "accessLogFile": "/dev/stdout",
        "extensionProviders": [
            {
                "name": "otel",
                "envoyOtelAls": {
                    "service": "opentelemetry-collector.istio-system.svc.cluster.local",
                    "port": 4317,
                },
            }
        ],
    },
    "components": {
        "pilot": {
            "k8s": {
                "env": [{"name": "PILOT_TRACE_SAMPLING", "value": "100"}],
                "resources": {"requests": {"cpu": "10m", "memory": "100Mi"}},
            }
        },
        "ingressGateways": [
            {
                "name": "istio-ingressgateway",
                "enabled": True,
                "k8s": {
                    "resources": {"requests": {"cpu": "10m", "memory": "40Mi"}},
                    "service": {"ports": _INGRESS_PORTS},
                },
            }
        ],
        "egressGateways": [
            {
                "name": "istio-egressgateway",
                "enabled": True,
                "k8s": {
                    "resources": {"requests": {"cpu": "10m", "memory": "40Mi"}},
                    "service": {"ports": _EGRESS_PORTS},
                },
            }
        ],
    },
    "values": {
        "global": {"proxy": {"resources": _resources("10m", "40Mi")}},
        "pilot": {"autoscaleEnabled": False},
        "gateways": {
            "istio-egressgateway": {"autoscaleEnabled": False},
            "istio-ingressgateway": {"autoscaleEnabled": False},
        },
    },
}

_MINIMAL: dict[str, Any] = {
    "components": {"ingressGateways": [_gateway("istio-ingressgateway", False)]},
}

_EMPTY: dict[str, Any] = {
    "components": {
        "base": {"enabled": False},
        "pilot": {"enabled": False},
        "ingressGateways": [_gateway("istio-ingressgateway", False)],
    },
}

_PREVIEW: dict[str, Any] = {
    "meshConfig": {
        "defaultConfig": {
            "proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true", "BOOTSTRAP_XDS_AGENT": "true"}
        }
    },
    "values": {
        "telemetry": {
            "v2": {"metadataExchange": {"wasmEnabled": True}, "prometheus": {"wasmEnabled": True}}
        }
    },
}

# A cluster whose istiod runs elsewhere: only the injector webhook, pointing at it.
_REMOTE: dict[str, Any] = {
    "components": {
        "base": {"enabled": False},
        "pilot": {"enabled": False},
        "ingressGateways": [_gateway("istio-ingressgateway", False)],
        "istiodRemote": {"enabled": True},
    },
    "values": {
        "global": {
            "externalIstiod": True,
            "omitSidecarInjectorConfigMap": True,
            "configCluster": False,
        },
        "pilot": {"configMap": False},
        "telemetry": {"enabled": False},
    },
}

# name -> (overlay on default (None: the profile is whole), description)
PROFILES: dict[str, tuple[dict[str, Any] | None, str]] = {
    "default": ({}, "production; the primary cluster of a multicluster mesh"),
    "demo": (_DEMO, "demo applications: both gateways, access logs, full trace sampling"),
    "empty": (_EMPTY, "nothing installed: a base for custom configurations"),
    "external": (_REMOTE, "a cluster whose control plane runs elsewhere (istiodRemote)"),
    "minimal": (_MINIMAL, "istiod only; gateways are configured separately"),
    "preview": (_PREVIEW, "default plus preview features (DNS capture, XDS agent)"),
    "remote": (_REMOTE, "the older name of `external`"),
}

UNSUPPORTED_PROFILES = {
    "ambient": "ambient mesh needs ztunnel and the Istio CNI node agent, which meshpilot "
    "does not have; use a sidecar profile (default, demo, minimal, ...)",
    "openshift": "OpenShift needs the Istio CNI plugin, which meshpilot does not have",
}


def profile_spec(name: str) -> dict[str, Any]:
    """The whole spec tree of profile `name` (default merged under it); a fresh copy."""
    from meshpilot.install.merge import merge_spec  # merge imports spec; no cycle at import

    if name in UNSUPPORTED_PROFILES:
        raise IstioOperatorError(f"profile {name!r} is not supported: {UNSUPPORTED_PROFILES[name]}")
    if name not in PROFILES:
        raise IstioOperatorError(
            f"unknown profile {name!r}; valid profiles: {', '.join(sorted(PROFILES))}"
        )
    overlay = PROFILES[name][0] or {}
    spec = merge_spec(copy.deepcopy(_DEFAULT), copy.deepcopy(overlay))
    spec["profile"] = name
    return spec
