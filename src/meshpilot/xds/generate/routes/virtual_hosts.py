"""Sidecar outbound virtual hosts: their names and domains (Istio's generateVirtualHostDomains,
GenerateAltVirtualHosts and dedupeDomains)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from meshpilot.registry.model import Resolution, Service
from meshpilot.xds import names
from meshpilot.xds.generate.routes.assembly import VirtualHostParts, domains_bytes

__all__ = [
    "DomainsMemo",
    "VirtualHostGroup",
    "alt_hosts",
    "build_virtual_hosts",
    "service_domains",
]

UNSPECIFIED_IP = "0.0.0.0"


# Not frozen (never changed once made): a frozen dataclass's __init__ sets each field
# through object.__setattr__, 3-4x the cost, and thousands are made per push.
@dataclass(slots=True)
class VirtualHostGroup:
    """Routes shared by some services (and VirtualService hosts that name no service), as
    serialized `VirtualHost.routes` entries (routes/assembly.py)."""

    routes: bytes
    services: Sequence[Service] = ()
    vs_hosts: Sequence[str] = field(default_factory=tuple)


def _ipv6_safe(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _kube_alt_hosts(hostname: str, proxy_domain: str) -> list[str]:
    """`name.ns.svc.<suffix>`: same namespace -> name, name.ns.svc, name.ns; other namespace
    -> name.ns, name.ns.svc."""
    svc_at = hostname.find(".svc.")
    if svc_at <= 0:
        return []
    first_dot = hostname.index(".")
    if first_dot + 1 >= len(hostname) or first_dot + 1 > svc_at:
        return []
    short, name_ns = hostname[:first_dot], hostname[:svc_at]
    if hostname[first_dot + 1 : svc_at] == proxy_domain[: proxy_domain.index(".svc.")]:
        return [short, f"{name_ns}.svc", name_ns]
    return [name_ns, f"{name_ns}.svc"]


def alt_hosts(hostname: str, proxy_domain: str) -> list[str]:
    """The shorter names a client in `proxy_domain` may use for `hostname` (no `:port` forms:
    sidecar route configs ignore the port in host matching)."""
    if ".svc." in proxy_domain:
        svc_suffix = proxy_domain[proxy_domain.index(".svc.") :]
        # Only Kubernetes-style names are expanded; others could clash with kube names.
        return _kube_alt_hosts(hostname, proxy_domain) if hostname.endswith(svc_suffix) else []
    host_parts, domain_parts = hostname.split("."), proxy_domain.split(".")
    shared = 0
    while (
        shared < min(len(host_parts), len(domain_parts))
        and host_parts[-1 - shared] == domain_parts[-1 - shared]
    ):
        shared += 1
    if shared == 0:
        return []
    unique = host_parts[: len(host_parts) - shared]
    out = [".".join(unique)]
    if len(unique) == 2:
        out.append(f"{out[0]}.{domain_parts[len(domain_parts) - shared]}")
    return out


def service_domains(
    svc: Service, proxy_domain: str, aliases: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """(domains, the alt hosts among them): FQDN and short forms, the same for each alias
    (ExternalName Services naming it), then the service addresses."""
    domains: list[str] = []
    alts: list[str] = []
    for name in (svc.hostname, *aliases):
        short = alt_hosts(name, proxy_domain)
        domains += [_ipv6_safe(name), *short]
        alts += short
    if svc.resolution is Resolution.PASSTHROUGH and svc.is_kubernetes:
        # Headless: clients address pods as <pod>.<service>...
        domains += [f"*.{d}" for d in domains]
    domains += [_ipv6_safe(a) for a in svc.addresses if a and a != UNSPECIFIED_IP]
    return domains, alts


class _DomainClaims:
    """Each domain may appear in one virtual host only: first come, first served."""

    def __init__(self, known_fqdns: set[str]) -> None:
        self.seen: set[str] = set()
        self.known_fqdns = known_fqdns

    def claim(
        self, domains: Sequence[str], alts: list[str], lowered: list[str], distinct: bool = False
    ) -> Sequence[str]:
        """`lowered`: the domains in lower case (made once per service, not per port);
        `distinct`: no two of them equal."""
        seen, known = self.seen, self.known_fqdns
        if distinct and seen.isdisjoint(lowered) and (not alts or known.isdisjoint(alts)):
            seen.update(lowered)  # the usual case, decided in C: every domain is kept
            return domains
        out = []
        for d, low in zip(domains, lowered):  # noqa: B905 (equal lengths, zip is hot here)
            if low in seen:
                continue
            # An expanded short name must not steal a real FQDN (foo.com vs foo.com.<suffix>).
            if alts and d in alts and d in known:
                continue
            out.append(d)
            seen.add(low)
        return out


# Not frozen (never changed once made): made for every service a proxy class sees.
@dataclass(slots=True)
class ServiceDomains:
    domains: tuple[str, ...]
    alts: list[str]  # the expanded short names among them
    encoded: bytes  # domains_bytes(domains)
    lowered: list[str]  # in lower case, for the claims
    distinct: bool  # no two lowered domains equal


# A service's domains by (hostname, namespace, aliases): the same on every port.
DomainsMemo = dict[tuple[str, str, Sequence[str]], ServiceDomains]


def _service_domains(svc: Service, proxy_domain: str, aliases: Sequence[str]) -> ServiceDomains:
    domains, alts = service_domains(svc, proxy_domain, aliases)
    lowered = [d.lower() for d in domains]
    return ServiceDomains(
        tuple(domains), alts, domains_bytes(domains), lowered, len(set(lowered)) == len(lowered)
    )


def build_virtual_hosts(
    groups: Sequence[VirtualHostGroup],
    port: int,
    proxy_domain: str,
    aliases: Mapping[str, Sequence[str]] | None = None,
    domains_memo: DomainsMemo | None = None,
) -> list[VirtualHostParts]:
    """Virtual hosts in group order; a repeated vhost name or domain keeps the first.
    `aliases`: per service hostname, the alias hostnames that join its domains;
    `domains_memo`: service domains worked out for this proxy class, filled as it goes."""
    aliases = aliases or {}
    memo: DomainsMemo = {} if domains_memo is None else domains_memo
    vhost_names = {
        s.hostname: names.vhost_name(s.hostname, port) for g in groups for s in g.services
    }
    known = {*vhost_names, *vhost_names.values()}
    claims = _DomainClaims(known)
    taken: set[str] = set()
    out = []
    for group in groups:
        routes = group.routes
        if not routes:
            continue
        for hostname in group.vs_hosts:  # VirtualService hosts that name no service
            name = vhost_names.get(hostname) or names.vhost_name(hostname, port)
            if name not in taken:
                taken.add(name)
                domains = [_ipv6_safe(hostname)]
                claimed = claims.claim(domains, [], [d.lower() for d in domains])
                if claimed:
                    out.append(VirtualHostParts(name, tuple(claimed), routes))
        for svc in group.services:
            hostname = svc.hostname
            name = vhost_names[hostname]
            if name in taken:
                continue
            taken.add(name)
            key = (hostname, svc.namespace, aliases.get(hostname, ()))
            found = memo.get(key)
            if found is None:
                found = memo[key] = _service_domains(svc, proxy_domain, key[2])
            claimed = claims.claim(found.domains, found.alts, found.lowered, found.distinct)
            if not claimed:
                continue
            if len(claimed) == len(found.domains):
                # Usually every domain is kept: the bytes made for another port serve.
                out.append(VirtualHostParts(name, found.domains, routes, found.encoded))
            else:
                out.append(VirtualHostParts(name, tuple(claimed), routes))
    return out
