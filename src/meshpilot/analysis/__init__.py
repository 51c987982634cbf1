"""Cross-object checks (`meshpilot analyze`): references that no single object can validate.

One module per analyzer, modelled on Istio's pkg/config/analysis/analyzers; each is a
function PushContext -> Diagnostics, listed in ANALYZERS. Messages carry Istio's analyzer
code (IST0101, ...) where Istio has one, else meshpilot's own (MPxxxx); analysis/messages.py
is the catalogue of codes and levels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from meshpilot.analysis.annotations import check_annotations
from meshpilot.analysis.conflicting_virtual_services import check_conflicting_virtual_services
from meshpilot.analysis.deprecated_fields import check_deprecated_fields
from meshpilot.analysis.destination_rule_tls import check_destination_rule_tls
from meshpilot.analysis.destination_rules import check_destination_rules
from meshpilot.analysis.envoy_filters import check_envoy_filters
from meshpilot.analysis.fail_closed import check_fail_closed
from meshpilot.analysis.gateway_conflicts import check_gateway_conflicts
from meshpilot.analysis.gateway_ports import check_gateway_ports
from meshpilot.analysis.gateways import check_gateway_workloads
from meshpilot.analysis.injection import check_injection
from meshpilot.analysis.peer_authentications import check_peer_authentications
from meshpilot.analysis.pod_services import check_pod_services
from meshpilot.analysis.port_names import check_port_names
from meshpilot.analysis.security_policies import check_security_policies
from meshpilot.analysis.service_entries import check_service_entries
from meshpilot.analysis.sidecar_conflicts import check_sidecar_conflicts
from meshpilot.analysis.sidecars import check_sidecars
from meshpilot.analysis.telemetry_providers import check_telemetry_providers
from meshpilot.analysis.virtual_service_destinations import (
    check_destination_hosts,
    check_destination_subsets,
)
from meshpilot.analysis.virtual_service_gateways import check_gateway_references
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.model.push_context import PushContext

__all__ = ["ANALYZERS", "analyze"]

Analyzer = Callable[[PushContext], Iterable[Diagnostic]]

ANALYZERS: tuple[Analyzer, ...] = (
    check_destination_hosts,
    check_destination_subsets,
    check_gateway_references,
    check_conflicting_virtual_services,
    check_gateway_workloads,
    check_destination_rules,
    check_sidecars,
    check_port_names,
    check_peer_authentications,
    check_security_policies,
    check_fail_closed,
    check_injection,
    check_annotations,
    check_sidecar_conflicts,
    check_pod_services,
    check_destination_rule_tls,
    check_service_entries,
    check_gateway_conflicts,
    check_gateway_ports,
    check_envoy_filters,
    check_telemetry_providers,
    check_deprecated_fields,
)


def analyze(push: PushContext) -> list[Diagnostic]:
    """Reference problems in a valid set of objects, sorted by file and line."""
    found: set[Diagnostic] = set()
    for analyzer in ANALYZERS:
        try:
            found.update(analyzer(push))
        except Exception as exc:  # a bug in one analyzer must not hide the others' findings
            found.add(
                Diagnostic(
                    file="<analysis>",
                    line=1,
                    message=f"internal error in {analyzer.__name__} "
                    f"({type(exc).__name__}: {exc}); please report",
                    code="IST0001",
                )
            )
    return sorted(found, key=Diagnostic.sort_key)
