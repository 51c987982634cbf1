"""Istio's resource annotations (istio.io/api annotation/annotations.yaml): the kinds each one
may be set on and whether it is deprecated. The annotation analyzer reads this table; an
annotation in an istio.io domain that is not here is unknown (IST0108).

Only the kinds meshpilot reads annotations from matter (Namespace, Service, Pod); "Any"
fits every kind.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANNOTATIONS", "AnnotationDef"]


@dataclass(frozen=True, slots=True)
class AnnotationDef:
    resources: tuple[str, ...]
    deprecated: bool = False


_POD = ("Pod",)
_SERVICE = ("Service",)
_ANY = ("Any",)

ANNOTATIONS: dict[str, AnnotationDef] = {
    "alpha.istio.io/kubernetes-serviceaccounts": AnnotationDef(_SERVICE, deprecated=True),
    "alpha.istio.io/canonical-serviceaccounts": AnnotationDef(_SERVICE, deprecated=True),
    "alpha.istio.io/identity": AnnotationDef(_POD, deprecated=True),
    "ambient.istio.io/redirection": AnnotationDef(_POD),
    "ambient.istio.io/bypass-inbound-capture": AnnotationDef(_POD),
    "galley.istio.io/analyze-suppress": AnnotationDef(_ANY),
    "inject.istio.io/templates": AnnotationDef(_POD),
    "install.operator.istio.io/chart-owner": AnnotationDef(_ANY),
    "install.operator.istio.io/owner-generation": AnnotationDef(_ANY),
    "install.operator.istio.io/version": AnnotationDef(_ANY),
    "istio.io/dry-run": AnnotationDef(("AuthorizationPolicy",)),
    "istio.io/rev": AnnotationDef(_POD),
    "istio.io/autoRegistrationGroup": AnnotationDef(("WorkloadEntry",)),
    "istio.io/connectedAt": AnnotationDef(("WorkloadEntry",)),
    "istio.io/disconnectedAt": AnnotationDef(("WorkloadEntry",)),
    "istio.io/workloadController": AnnotationDef(("WorkloadEntry",)),
    "kubernetes.io/ingress.class": AnnotationDef(("Ingress",)),
    "networking.istio.io/exportTo": AnnotationDef(_SERVICE),
    "networking.istio.io/traffic-distribution": AnnotationDef(_SERVICE),
    "prometheus.istio.io/merge-metrics": AnnotationDef(_POD),
    "proxy.istio.io/config": AnnotationDef(_POD),
    "proxy.istio.io/overrides": AnnotationDef(_POD),
    "readiness.status.sidecar.istio.io/applicationPorts": AnnotationDef(_POD),
    "readiness.status.sidecar.istio.io/failureThreshold": AnnotationDef(_POD),
    "readiness.status.sidecar.istio.io/initialDelaySeconds": AnnotationDef(_POD),
    "readiness.status.sidecar.istio.io/periodSeconds": AnnotationDef(_POD),
    "sidecar.istio.io/agentLogLevel": AnnotationDef(_POD),
    "sidecar.istio.io/bootstrapOverride": AnnotationDef(_POD),
    "sidecar.istio.io/componentLogLevel": AnnotationDef(_POD),
    "sidecar.istio.io/controlPlaneAuthPolicy": AnnotationDef(_POD, deprecated=True),
    "sidecar.istio.io/discoveryAddress": AnnotationDef(_POD, deprecated=True),
    "sidecar.istio.io/enableCoreDump": AnnotationDef(_POD),
    "sidecar.istio.io/extraStatTags": AnnotationDef(_POD),
    "sidecar.istio.io/inject": AnnotationDef(_POD, deprecated=True),
    "sidecar.istio.io/interceptionMode": AnnotationDef(_POD),
    "sidecar.istio.io/logLevel": AnnotationDef(_POD),
    "sidecar.istio.io/nativeSidecar": AnnotationDef(_POD),
    "sidecar.istio.io/proxyCPU": AnnotationDef(_POD),
    "sidecar.istio.io/proxyCPULimit": AnnotationDef(_POD),
    "sidecar.istio.io/proxyImage": AnnotationDef(_POD),
    "sidecar.istio.io/proxyImageType": AnnotationDef(_POD),
    "sidecar.istio.io/proxyMemory": AnnotationDef(_POD),
    "sidecar.istio.io/proxyMemoryLimit": AnnotationDef(_POD),
    "sidecar.istio.io/rewriteAppHTTPProbers": AnnotationDef(_POD),
    "sidecar.istio.io/statsCompression": AnnotationDef(_POD),
    "sidecar.istio.io/statsEvictionInterval": AnnotationDef(_POD),
    "sidecar.istio.io/statsFlushInterval": AnnotationDef(_POD),
    "sidecar.istio.io/statsHistogramBuckets": AnnotationDef(_POD),
    "sidecar.istio.io/statsInclusionPrefixes": AnnotationDef(_POD, deprecated=True),
    "sidecar.istio.io/statsInclusionRegexps": AnnotationDef(_POD, deprecated=True),
    "sidecar.istio.io/statsInclusionSuffixes": AnnotationDef(_POD, deprecated=True),
    "sidecar.istio.io/status": AnnotationDef(_POD),
    "sidecar.istio.io/userVolume": AnnotationDef(_POD),
    "sidecar.istio.io/userVolumeMount": AnnotationDef(_POD),
    "status.sidecar.istio.io/port": AnnotationDef(_POD),
    "topology.istio.io/controlPlaneClusters": AnnotationDef(_ANY),
    "traffic.istio.io/nodeSelector": AnnotationDef(_SERVICE),
    "traffic.sidecar.istio.io/excludeInboundPorts": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/excludeInterfaces": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/excludeOutboundIPRanges": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/excludeOutboundPorts": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/includeInboundPorts": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/includeOutboundIPRanges": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/includeOutboundPorts": AnnotationDef(_POD),
    "traffic.sidecar.istio.io/kubevirtInterfaces": AnnotationDef(_POD),
}
