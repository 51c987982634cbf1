"""Which Sidecar egress entry builds a sidecar route config (Istio's GetEgressListenerForRDS).

Route config `<port>` (and a sniffed `<host>:<port>`) is built from one egress entry: the
first one whose `port` is that port, else the catch-all (the entry without a port). Its
services and VirtualServices are those of that entry's `hosts` only, not of every entry of
the Sidecar. Istio names the route config `<port>` whatever the entry's `bind` (the bind only
names it for Unix sockets, which meshpilot does not serve). Without a Sidecar, or one without
egress entries, the whole scope applies.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.config.hosts import host_matches
from meshpilot.model.sidecar_scope import EgressHost, SidecarScope
from meshpilot.registry.model import Service

__all__ = ["EgressView", "egress_entry", "egress_view"]

WHOLE_SCOPE = -1  # no Sidecar egress entries: the scope itself
NO_ENTRY = -2  # egress entries, none for this port and no catch-all: nothing to route


@dataclass(frozen=True, slots=True)
class EgressView:
    """The services (aliases left out) and imported hosts one route config is built from."""

    services: tuple[Service, ...]
    imported: tuple[EgressHost, ...] | None  # None: every host

    def allows_host(self, hostname: str, namespace: str) -> bool:
        """Could a VirtualService host of `namespace` be seen through these imports?"""
        if self.imported is None:
            return True
        return any(
            e.namespace in ("*", namespace)
            and (host_matches(e.host, hostname) or host_matches(hostname, e.host))
            for e in self.imported
        )


def egress_entry(scope: SidecarScope, port: int) -> int:
    """Index of the Sidecar egress entry that builds route configs of `port`."""
    entries = scope.sidecar.model.spec.egress if scope.sidecar else []
    if not entries:
        return WHOLE_SCOPE
    for i, e in enumerate(entries):
        if e.port is not None and e.port.number == port:
            return i
    return next((i for i, e in enumerate(entries) if e.port is None or not e.port.number), NO_ENTRY)


def egress_view(scope: SidecarScope, index: int) -> EgressView:
    concrete = tuple(s for s in scope.services if not s.is_alias)
    if index == WHOLE_SCOPE or scope.sidecar is None:
        return EgressView(concrete, scope.egress_hosts)
    if index == NO_ENTRY:
        return EgressView((), ())
    entry = scope.sidecar.model.spec.egress[index]
    imported = tuple(EgressHost.parse(h, scope.sidecar.namespace) for h in entry.hosts)
    return EgressView(tuple(s for s in concrete if any(h.matches(s) for h in imported)), imported)
