"""What the demo mesh is made of: namespaces, services, workloads, host names and ports.

    ingress gateway ──HTTPS──► productpage ──► reviews v1 (80%) / v2 (20%; end-user: jason)
    client, client-locked ──► reviews, ratings (retries, faults, timeout), tcp-echo (TCP)
    client ──► api.external.test (directly)      ┐ the "external" server, outside the
    client ──mTLS──► egress gateway ──► egress.external.test ┘ mesh in a namespace of its own
    client-locked: outboundTrafficPolicy REGISTRY_ONLY (a Sidecar object)

Pods with a sidecar carry `security.istio.io/tlsMode: istio`, as Istio's injector adds it:
callers' sidecars and the gateways then talk mTLS to them (auto mTLS), with the workload
certificates each agent gets from the control plane's CA. On the loopback fallback only the
client has a sidecar, so only it is labelled (an unlabelled app is called in plaintext).
The egress gateway is labelled too: sidecars reach it over mTLS (its Gateway server is
ISTIO_MUTUAL). The ingress gateway is not: it serves SIMPLE TLS to clients outside the mesh,
and the label would make an in-mesh caller wrap mTLS around that.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

__all__ = [
    "API_HOST",
    "EGRESS_HOST",
    "GATEWAY_NAMESPACE",
    "INGRESS_HOST",
    "NAMESPACE",
    "UNREGISTERED_HOST",
    "DemoPorts",
    "Role",
    "ServiceDef",
    "Topology",
    "Workload",
]

NAMESPACE = "default"
GATEWAY_NAMESPACE = "istio-system"
EXTERNAL_NAMESPACE = "external"

INGRESS_HOST = "bookinfo.demo.test"  # served by the ingress gateway, in its certificate
API_HOST = "api.external.test"  # registered; sidecars call it directly
EGRESS_HOST = "egress.external.test"  # registered; sidecars go through the egress gateway
UNREGISTERED_HOST = "unregistered.external.test"  # in no ServiceEntry
INGRESS_POD = "istio-ingressgateway-0"
TLS_MODE_LABEL = ("security.istio.io/tlsMode", "istio")  # set by Istio's injector
EGRESS_POD = "istio-egressgateway-0"


@dataclass(frozen=True, slots=True)
class DemoPorts:
    """Service ports and gateway container ports. In pods these are Istio's usual numbers;
    without network namespaces everything shares the host's loopback, so the fallback picks
    free unprivileged ones."""

    http: int = 9080  # every HTTP service
    tcp: int = 9000  # tcp-echo
    external: int = 80  # the external server, registered by ServiceEntries
    ingress_service: int = 443  # the ingress gateway Service's HTTPS port
    ingress: int = 8443  # ... and its container (listener) port
    egress_service: int = 443  # the egress gateway Service's HTTPS (ISTIO_MUTUAL) port
    egress: int = 8443  # ... and its container (listener) port


class Role(StrEnum):
    HTTP = "http"  # the demo HTTP app with a sidecar
    TCP = "tcp"  # the TCP echo app with a sidecar
    CLIENT = "client"  # no app: a sidecar to send requests from
    ROUTER = "router"  # a gateway: Envoy only, no capture
    EXTERNAL = "external"  # outside the mesh: an app, no sidecar, in no Service


@dataclass(frozen=True, slots=True)
class Workload:
    name: str  # the pod's name
    role: Role
    app: str  # the `app` label and service name the app reports
    version: str = "v1"
    namespace: str = NAMESPACE
    port: int = 0  # the app's port (0: none)
    call: str = ""  # URL the app's /productpage calls
    call_host: str = ""  # its Host header, when the URL names the sidecar's address
    extra_labels: tuple[tuple[str, str], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name}.{self.namespace}"

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.app, "version": self.version, **dict(self.extra_labels)}

    @property
    def in_mesh(self) -> bool:
        return self.role is not Role.EXTERNAL

    @property
    def has_sidecar(self) -> bool:
        return self.role in (Role.HTTP, Role.TCP, Role.CLIENT)

    def scaled(self, suffix: str) -> Workload:
        """Another pod of the same app and version (scaling out), e.g. ratings-v1-b."""
        return replace(self, name=f"{self.name}-{suffix}")


@dataclass(frozen=True, slots=True)
class ServiceDef:
    name: str
    cluster_ip: str
    selector: tuple[tuple[str, str], ...]
    ports: tuple[tuple[str, int, int], ...]  # (name, port, targetPort)
    namespace: str = NAMESPACE

    @property
    def fqdn(self) -> str:
        return f"{self.name}.{self.namespace}.svc.cluster.local"


def _services(p: DemoPorts) -> tuple[ServiceDef, ...]:
    def app(name: str, ip: str, port_name: str, port: int) -> ServiceDef:
        return ServiceDef(name, ip, (("app", name),), ((port_name, port, port),))

    return (
        app("productpage", "10.96.0.10", "http", p.http),
        app("reviews", "10.96.0.11", "http", p.http),
        app("ratings", "10.96.0.12", "http", p.http),
        app("tcp-echo", "10.96.0.13", "tcp-echo", p.tcp),
        ServiceDef(
            "istio-ingressgateway", "10.96.1.10", (("istio", "ingressgateway"),),
            (("https", p.ingress_service, p.ingress),), GATEWAY_NAMESPACE,
        ),
        ServiceDef(
            "istio-egressgateway", "10.96.1.20", (("istio", "egressgateway"),),
            (("https", p.egress_service, p.egress),), GATEWAY_NAMESPACE,
        ),
    )  # fmt: skip


def _injected(work: Workload, loopback: bool) -> Workload:
    """The injector's label on a pod whose sidecar runs (on the loopback: the client's)."""
    if not work.has_sidecar or (loopback and work.role is not Role.CLIENT):
        return work
    return replace(work, extra_labels=(*work.extra_labels, TLS_MODE_LABEL))


def _workloads(p: DemoPorts, loopback: bool) -> tuple[Workload, ...]:
    http, tcp, client = Role.HTTP, Role.TCP, Role.CLIENT
    reviews = f"reviews:{p.http}"
    call = f"http://127.0.0.1:{p.http}/reviews" if loopback else f"http://{reviews}/reviews"
    call_host = reviews if loopback else ""
    workloads = [
        Workload(
            "productpage-v1", http, "productpage", port=p.http, call=call, call_host=call_host
        ),
        Workload("reviews-v1", http, "reviews", "v1", port=p.http),
        Workload("reviews-v2", http, "reviews", "v2", port=p.http),
        Workload("ratings-v1", http, "ratings", port=p.http),
        Workload("tcp-echo-v1", tcp, "tcp-echo", port=p.tcp),
        Workload("client", client, "client"),
        *([] if loopback else [Workload("client-locked", client, "client-locked")]),
    ]
    workloads = [_injected(w, loopback) for w in workloads]
    for pod, istio in ((INGRESS_POD, "ingressgateway"), (EGRESS_POD, "egressgateway")):
        labels: tuple[tuple[str, str], ...] = (("istio", istio),)
        if pod == EGRESS_POD:  # sidecars call it over mTLS (see the module docstring)
            labels = (*labels, TLS_MODE_LABEL)
        workloads.append(
            Workload(pod, Role.ROUTER, f"istio-{istio}", namespace=GATEWAY_NAMESPACE,
                     extra_labels=labels)
        )  # fmt: skip
    return tuple(workloads)


@dataclass(frozen=True, slots=True)
class Topology:
    """The demo for a set of ports. `loopback`: the fallback without network namespaces,
    where every "pod" is an address on the host's loopback and only the client has a
    sidecar (interceptionMode NONE: its listeners bind 127.0.0.1:<service port>, which
    apps call with the service's name as Host). There is no client-locked pod then: a
    second such sidecar would need the same 127.0.0.1 ports."""

    ports: DemoPorts = DemoPorts()
    loopback: bool = False
    services: tuple[ServiceDef, ...] = field(init=False)
    workloads: tuple[Workload, ...] = field(init=False)
    external: Workload = field(init=False)

    def __post_init__(self) -> None:
        set_field = object.__setattr__
        set_field(self, "services", _services(self.ports))
        set_field(self, "workloads", _workloads(self.ports, self.loopback))
        external = Workload("httpbin", Role.EXTERNAL, "external", namespace=EXTERNAL_NAMESPACE,
                            port=self.ports.external)  # fmt: skip
        set_field(self, "external", external)

    def workload(self, name: str) -> Workload:
        for candidate in (*self.workloads, self.external):
            if candidate.name == name:
                return candidate
        raise KeyError(f"no demo workload {name!r}")

    def service_hosts(self) -> dict[str, list[str]]:
        """/etc/hosts lines for pods in the mesh: each service's names at its cluster IP (a
        sidecar routes by what the app asked for; capture takes the packet first)."""
        hosts: dict[str, list[str]] = {}
        for svc in self.services:
            short = [svc.name] if svc.namespace == NAMESPACE else []
            names = [*short, f"{svc.name}.{svc.namespace}", f"{svc.name}.{svc.namespace}.svc"]
            hosts[svc.cluster_ip] = [*names, svc.fqdn]
        return hosts
