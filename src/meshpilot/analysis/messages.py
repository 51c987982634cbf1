"""The analyzer message catalogue: Istio's codes (pkg/config/analysis/msg/messages.yaml), with
their names and levels, plus meshpilot's own (MPxxxx) for checks Istio does not have.

An analyzer names the code of what it found; the level comes from here, so a finding is
graded as istioctl grades it. The texts are written where the finding is made, following
Istio's templates word for word for IST codes.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.config.diagnostics import Severity

__all__ = ["DOCS_URL", "MESSAGES", "MessageType", "documentation_url", "level_of"]

# Where Istio documents each code (`<url>/ist0101/`); meshpilot codes have no page there.
DOCS_URL = "https://istio.io/latest/docs/reference/config/analysis"

E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


@dataclass(frozen=True, slots=True)
class MessageType:
    code: str
    name: str
    level: Severity


MESSAGES: dict[str, MessageType] = {
    m.code: m
    for m in (
        MessageType("IST0001", "InternalError", E),
        MessageType("IST0002", "Deprecated", W),
        MessageType("IST0101", "ReferencedResourceNotFound", E),
        MessageType("IST0102", "NamespaceNotInjected", INFO),
        MessageType("IST0103", "PodMissingProxy", W),
        MessageType("IST0104", "GatewayPortNotOnWorkload", W),
        MessageType("IST0106", "SchemaValidationError", E),
        MessageType("IST0107", "MisplacedAnnotation", W),
        MessageType("IST0108", "UnknownAnnotation", W),
        MessageType("IST0109", "ConflictingMeshGatewayVirtualServiceHosts", E),
        MessageType("IST0110", "ConflictingSidecarWorkloadSelectors", E),
        MessageType("IST0111", "MultipleSidecarsWithoutWorkloadSelectors", E),
        MessageType("IST0112", "VirtualServiceDestinationPortSelectorRequired", E),
        MessageType("IST0113", "MTLSPolicyConflict", E),
        MessageType("IST0116", "DeploymentAssociatedToMultipleServices", W),
        MessageType("IST0118", "PortNameIsNotUnderNamingConvention", INFO),
        MessageType("IST0122", "InvalidRegexp", W),
        MessageType("IST0123", "NamespaceMultipleInjectionLabels", W),
        MessageType("IST0125", "InvalidAnnotation", W),
        MessageType("IST0127", "NoMatchingWorkloadsFound", W),
        MessageType("IST0128", "NoServerCertificateVerificationDestinationLevel", W),
        MessageType("IST0129", "NoServerCertificateVerificationPortLevel", W),
        MessageType("IST0130", "VirtualServiceUnreachableRule", W),
        MessageType("IST0131", "VirtualServiceIneffectiveMatch", INFO),
        MessageType("IST0132", "VirtualServiceHostNotFoundInGateway", W),
        MessageType("IST0133", "SchemaWarning", W),
        MessageType("IST0134", "ServiceEntryAddressesRequired", W),
        MessageType("IST0135", "DeprecatedAnnotation", INFO),
        MessageType("IST0145", "ConflictingGateways", E),
        MessageType("IST0150", "ExternalNameServiceTypeInvalidPortName", W),
        MessageType("IST0161", "InvalidGatewayCredential", E),
        MessageType("IST0162", "GatewayPortNotDefinedOnService", W),
        # Istio: Error. A warning here: a subset without Pods breaks only the routes to it,
        # and where workloads are registered apart from the mesh config (GitOps, universal
        # mode) an Error would mark every such DestinationRule Degraded.
        MessageType("IST0173", "DestinationRuleSubsetNotSelectPods", W),
        MessageType("IST0174", "UnknownDestinationRuleHost", W),
        # meshpilot's own checks
        MessageType("MP0001", "UnparseableInput", E),
        MessageType("MP0002", "UnknownKind", W),
        MessageType("MP0003", "UnsupportedField", W),
        MessageType("MP0004", "SecurityPolicyFailingClosed", W),
        MessageType("MP0005", "PeerAuthenticationIgnored", W),
        MessageType("MP0006", "PeerAuthenticationSelectorInRootNamespace", W),
        MessageType("MP0007", "ServiceEntryPortWithoutProtocol", W),
        MessageType("MP0008", "JwksHostNotFound", W),
        MessageType("MP0009", "SidecarEgressHostNotFound", W),
        MessageType("MP0010", "KindNotAppliedYet", W),
        MessageType("MP0011", "EnvoyFilterPatchSkipped", W),
        MessageType("MP0012", "ExtAuthzProviderUnusable", E),
        MessageType("MP0013", "TelemetryProviderUnusable", W),
    )
}


def level_of(code: str) -> Severity:
    """The level of a code; a code missing from the catalogue is a bug, hence KeyError."""
    return MESSAGES[code].level


def documentation_url(code: str) -> str:
    """Istio's page about an IST code; "" for meshpilot's codes, which Istio does not know
    (docs/cli.md lists them)."""
    return f"{DOCS_URL}/{code.lower()}/" if code.startswith("IST") else ""
