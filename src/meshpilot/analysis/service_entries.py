"""ServiceEntries with TCP ports (or ports of no declared protocol) and no addresses: a TCP
listener is keyed by address and port, so without a VIP the proxy cannot tell such hosts
apart (IST0134, Istio's serviceentry.ProtocolAddressesAnalyzer). Not reported when the mesh
captures DNS and auto-allocates addresses (ISTIO_META_DNS_CAPTURE and
ISTIO_META_DNS_AUTO_ALLOCATE in defaultConfig.proxyMetadata)."""

from __future__ import annotations

from collections.abc import Iterator

from meshpilot.analysis.findings import finding
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.model.push_context import PushContext

__all__ = ["check_service_entries"]


def check_service_entries(push: PushContext) -> Iterator[Diagnostic]:
    metadata = push.mesh.default_config.proxy_metadata
    if (
        metadata.get("ISTIO_META_DNS_CAPTURE") == "true"
        and metadata.get("ISTIO_META_DNS_AUTO_ALLOCATE") == "true"
    ):
        return
    for entry in push.of_kind(Kind.SERVICE_ENTRY):
        spec = entry.model.spec
        if spec.addresses:
            continue
        for index, port in enumerate(spec.ports):
            if (port.protocol or "") in ("", "TCP"):
                yield finding(
                    entry,
                    ("spec", "ports", index),
                    "ServiceEntry addresses are required for this protocol.",
                    code="IST0134",
                )
