"""DestinationRules that originate TLS (mode SIMPLE or MUTUAL) without caCertificates, so the
server's certificate is not verified: for the whole host (IST0128) or a port (IST0129).
Istio's destinationrule.CaCertificateAnalyzer."""

from __future__ import annotations

from collections.abc import Iterator

from meshpilot.analysis.findings import finding
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.model.push_context import PushContext

__all__ = ["check_destination_rule_tls"]

_ORIGINATING = ("SIMPLE", "MUTUAL")


def check_destination_rule_tls(push: PushContext) -> Iterator[Diagnostic]:
    for dr in push.of_kind(Kind.DESTINATION_RULE):
        spec = dr.model.spec
        policy = spec.traffic_policy
        if policy is None:
            continue
        unverified = f"DestinationRule {dr.namespace}/{dr.name} in namespace {dr.namespace}"
        tls = policy.tls
        if tls is not None and tls.mode in _ORIGINATING and not tls.ca_certificates:
            yield finding(
                dr,
                ("spec", "trafficPolicy", "tls", "mode"),
                f"{unverified} has TLS mode set to {tls.mode} but no caCertificates are set to "
                f"validate server identity for host: {spec.host}",
                code="IST0128",
            )
        for index, settings in enumerate(policy.port_level_settings):
            tls = settings.tls
            if tls is None or tls.mode not in _ORIGINATING or tls.ca_certificates:
                continue
            # Go's text form of the PortSelector message, as Istio prints it
            port = f"number:{settings.port.number}" if settings.port else ""
            yield finding(
                dr,
                ("spec", "trafficPolicy", "portLevelSettings", index, "tls", "mode"),
                f"{unverified} has TLS mode set to {tls.mode} but no caCertificates are set to "
                f"validate server identity for host: {spec.host} at port {port}",
                code="IST0129",
            )
