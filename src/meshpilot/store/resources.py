"""kubectl's names for the kinds in the store: plural, singular, short names, API group, and
the columns `get` prints (the CRDs' additionalPrinterColumns for Istio and Argo CD kinds).

`resolve_resource("vs")` -> ResourceType of VirtualService; `display_name` gives
`virtualservice.networking.istio.io/reviews` as kubectl prints it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from meshpilot.config.kinds import CLUSTER_SCOPED, Kind
from meshpilot.errors import MeshpilotError

__all__ = [
    "RESOURCE_TYPES",
    "Column",
    "ResourceType",
    "UnknownResourceError",
    "resolve_resource",
    "resource_type",
]

Manifest = dict[str, Any]


class UnknownResourceError(MeshpilotError):
    """A resource name on the command line that names no kind of the store."""


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    value: Callable[[Manifest], str]
    wide_only: bool = False


@dataclass(frozen=True, slots=True)
class ResourceType:
    kind: Kind
    group: str
    plural: str
    singular: str
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()

    @property
    def namespaced(self) -> bool:
        return self.kind not in CLUSTER_SCOPED

    @property
    def qualified_plural(self) -> str:
        """`virtualservices.networking.istio.io`, or `services` for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def display_name(self, name: str) -> str:
        """kubectl's `virtualservice.networking.istio.io/reviews`."""
        singular = f"{self.singular}.{self.group}" if self.group else self.singular
        return f"{singular}/{name}"


def _path(*path: str, default: str = "") -> Callable[[Manifest], str]:
    def get(obj: Manifest) -> str:
        value: Any = obj
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if value is None or value == "":
            return default
        if isinstance(value, list | dict):
            return json.dumps(value, separators=(",", ":"))
        return str(value)

    return get


def _count(*path: str) -> Callable[[Manifest], str]:
    def get(obj: Manifest) -> str:
        value: Any = obj
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        return str(len(value)) if isinstance(value, dict | list) else "0"

    return get


def _service_ports(obj: Manifest) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    out = [f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports if isinstance(p, dict)]
    return ",".join(out) or "<none>"


_NET = "networking.istio.io"
_SEC = "security.istio.io"
_ARGO = "argoproj.io"

RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType(Kind.NAMESPACE, "", "namespaces", "namespace", ("ns",),
                 (Column("STATUS", _path("status", "phase", default="Active")),)),
    ResourceType(Kind.SERVICE, "", "services", "service", ("svc",), (
        Column("TYPE", _path("spec", "type", default="ClusterIP")),
        Column("CLUSTER-IP", _path("spec", "clusterIP", default="<none>")),
        Column("PORT(S)", _service_ports),
    )),
    ResourceType(Kind.ENDPOINTS, "", "endpoints", "endpoints", ("ep",)),
    ResourceType(Kind.ENDPOINT_SLICE, "discovery.k8s.io", "endpointslices", "endpointslice", (),
                 (Column("ADDRESSTYPE", _path("addressType")),)),
    ResourceType(Kind.POD, "", "pods", "pod", ("po",), (
        Column("STATUS", _path("status", "phase", default="Unknown")),
        Column("IP", _path("status", "podIP", default="<none>"), wide_only=True),
    )),
    ResourceType(Kind.SECRET, "", "secrets", "secret", (), (
        Column("TYPE", _path("type", default="Opaque")),
        Column("DATA", lambda o: str(len(o.get("data") or {}) + len(o.get("stringData") or {}))),
    )),
    ResourceType(Kind.SERVICE_ACCOUNT, "", "serviceaccounts", "serviceaccount", ("sa",)),
    ResourceType(Kind.CONFIG_MAP, "", "configmaps", "configmap", ("cm",),
                 (Column("DATA", _count("data")),)),
    ResourceType(Kind.DEPLOYMENT, "apps", "deployments", "deployment", ("deploy",),
                 (Column("REPLICAS", _path("spec", "replicas", default="1")),)),
    ResourceType(Kind.GATEWAY, _NET, "gateways", "gateway", ("gw",)),
    ResourceType(Kind.VIRTUAL_SERVICE, _NET, "virtualservices", "virtualservice", ("vs",), (
        Column("GATEWAYS", _path("spec", "gateways")),
        Column("HOSTS", _path("spec", "hosts")),
    )),
    ResourceType(Kind.DESTINATION_RULE, _NET, "destinationrules", "destinationrule", ("dr",),
                 (Column("HOST", _path("spec", "host")),)),
    ResourceType(Kind.SERVICE_ENTRY, _NET, "serviceentries", "serviceentry", ("se",), (
        Column("HOSTS", _path("spec", "hosts")),
        Column("LOCATION", _path("spec", "location")),
        Column("RESOLUTION", _path("spec", "resolution")),
    )),
    ResourceType(Kind.WORKLOAD_ENTRY, _NET, "workloadentries", "workloadentry", ("we",),
                 (Column("ADDRESS", _path("spec", "address")),)),
    ResourceType(Kind.SIDECAR, _NET, "sidecars", "sidecar"),
    ResourceType(Kind.PEER_AUTHENTICATION, _SEC, "peerauthentications", "peerauthentication",
                 ("pa",), (Column("MODE", _path("spec", "mtls", "mode")),)),
    ResourceType(Kind.REQUEST_AUTHENTICATION, _SEC, "requestauthentications",
                 "requestauthentication", ("ra",)),
    ResourceType(Kind.AUTHORIZATION_POLICY, _SEC, "authorizationpolicies", "authorizationpolicy",
                 ("ap",), (Column("ACTION", _path("spec", "action", default="ALLOW")),)),
    ResourceType(Kind.ENVOY_FILTER, _NET, "envoyfilters", "envoyfilter"),
    ResourceType(Kind.TELEMETRY, "telemetry.istio.io", "telemetries", "telemetry"),
    ResourceType(Kind.WASM_PLUGIN, "extensions.istio.io", "wasmplugins", "wasmplugin"),
    ResourceType(Kind.PROXY_CONFIG, _NET, "proxyconfigs", "proxyconfig"),
    ResourceType(Kind.WORKLOAD_GROUP, _NET, "workloadgroups", "workloadgroup", ("wg",)),
    ResourceType(Kind.APPLICATION, _ARGO, "applications", "application", ("app", "apps"), (
        Column("SYNC STATUS", _path("status", "sync", "status")),
        Column("HEALTH STATUS", _path("status", "health", "status")),
        Column("REVISION", _path("status", "sync", "revision"), wide_only=True),
        Column("PROJECT", _path("spec", "project"), wide_only=True),
    )),
    ResourceType(Kind.APP_PROJECT, _ARGO, "appprojects", "appproject", ("appproj", "appprojs")),
    ResourceType(Kind.ISTIO_OPERATOR, "install.istio.io", "istiooperators", "istiooperator",
                 ("iop", "io"), (Column("REVISION", _path("spec", "revision")),
                                 Column("PROFILE", _path("spec", "profile")))),
    ResourceType(Kind.MUTATING_WEBHOOK_CONFIGURATION, "admissionregistration.k8s.io",
                 "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", (),
                 (Column("WEBHOOKS", _count("webhooks")),)),
)  # fmt: skip

_BY_KIND = {rt.kind: rt for rt in RESOURCE_TYPES}


def resource_type(kind: Kind) -> ResourceType:
    """The naming of a kind; kinds without an entry get kubectl's lower-case defaults."""
    found = _BY_KIND.get(kind)
    if found is not None:
        return found
    lower = str(kind).lower()
    return ResourceType(kind, "", lower + "s", lower)


def _names(rt: ResourceType) -> set[str]:
    names = {rt.plural, rt.singular, str(rt.kind).lower(), *rt.short_names}
    if rt.group:
        names |= {f"{rt.plural}.{rt.group}", f"{rt.singular}.{rt.group}"}
    return names


def resolve_resource(name: str) -> ResourceType:
    """`vs`, `virtualservices`, `VirtualService`, `virtualservice.networking.istio.io`, ..."""
    wanted = name.strip().lower()
    for rt in RESOURCE_TYPES:
        if wanted in _names(rt):
            return rt
    raise UnknownResourceError(f'the server doesn\'t have a resource type "{name}"')
