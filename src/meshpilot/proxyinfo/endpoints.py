"""`proxy-config endpoints`: istioctl's summaries and filters (--address, --port, --cluster,
--status).

From Envoy's `/clusters?format=json` (admin, or a saved file) the table is istioctl's
ENDPOINT, STATUS, OUTLIER CHECK, CLUSTER (health as Envoy sees it), sorted by address, port
and cluster. From EDS assignments (a config dump taken with ?include_eds, or the control
plane) it is istioctl's config-dump table ENDPOINT, STATUS, LOCALITY, CLUSTER: the declared
health (UNKNOWN when none), clusters sorted as the clusters table sorts them.
Internal addresses print as istioctl prints them: `envoy://LISTENER/ENDPOINT_ID`.
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.proxyinfo.clusters import ClusterName
from meshpilot.proxyinfo.fields import JsonObject, flag, integer, obj, objs, text
from meshpilot.proxyinfo.source import ProxyData
from meshpilot.proxyinfo.table import Table

__all__ = [
    "COLUMNS",
    "EDS_COLUMNS",
    "EndpointFilter",
    "EndpointRow",
    "endpoint_rows",
    "endpoint_table",
    "select_endpoints",
]

COLUMNS = ("ENDPOINT", "STATUS", "OUTLIER CHECK", "CLUSTER")
EDS_COLUMNS = ("ENDPOINT", "STATUS", "LOCALITY", "CLUSTER")


@dataclass(frozen=True, slots=True)
class EndpointRow:
    address: str
    port: int
    status: str
    outlier_check: str  # OK or FAILED (from Envoy); the LOCALITY for EDS rows
    cluster: str
    has_port: bool = True  # socket addresses: `address:port`; pipes and internal ones not

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.port}" if self.has_port else self.address

    def cells(self) -> tuple[str, ...]:
        return self.endpoint, self.status, self.outlier_check, self.cluster


@dataclass(frozen=True, slots=True)
class EndpointFilter:
    address: str = ""
    port: int = 0
    cluster: str = ""
    status: str = ""

    def matches(self, row: EndpointRow) -> bool:
        if self.address and row.address.lower() != self.address.lower():
            return False
        if self.port and row.port != self.port:
            return False
        if self.cluster and row.cluster.lower() != self.cluster.lower():
            return False
        return not (self.status and row.status.lower() != self.status.lower())


def _address(address: JsonObject, pipe_prefix: str) -> tuple[str, int, bool]:
    """(address, port, whether it has one), as istioctl prints it: pipes with `unix://`
    from /clusters and bare from a config dump; internal addresses as envoy:// URLs."""
    if socket := obj(address, "socket_address"):
        return text(socket, "address"), integer(socket, "port_value"), True
    if pipe := obj(address, "pipe"):
        return pipe_prefix + text(pipe, "path"), 0, False
    if internal := obj(address, "envoy_internal_address"):
        listener, endpoint_id = (
            text(internal, "server_listener_name"),
            text(internal, "endpoint_id"),
        )
        return (f"envoy://{listener}/{endpoint_id}" if listener else endpoint_id), 0, False
    return "unknown", 0, False


def _admin_rows(status: JsonObject) -> list[EndpointRow]:
    rows = []
    for host in objs(status, "host_statuses"):
        address, port, has_port = _address(obj(host, "address"), "unix://")
        health = obj(host, "health_status")
        outlier = "FAILED" if flag(health, "failed_outlier_check") else "OK"
        eds_status = text(health, "eds_health_status") or "UNKNOWN"
        rows.append(EndpointRow(address, port, eds_status, outlier, text(status, "name"), has_port))
    return rows


def _locality(locality: JsonObject) -> str:
    """Istio's LocalityToString: region, then /zone, then /subzone; stops at an unset zone."""
    region, zone, sub_zone = (text(locality, key) for key in ("region", "zone", "sub_zone"))
    if not zone:
        return region
    return f"{region}/{zone}/{sub_zone}" if sub_zone else f"{region}/{zone}"


def _declared_row(cluster: str, where: str, lb_endpoint: JsonObject) -> EndpointRow:
    address, port, has_port = _address(obj(lb_endpoint, "endpoint", "address"), "")
    # istioctl prints the declared status; proto JSON omits the default, UNKNOWN
    status = text(lb_endpoint, "health_status") or "UNKNOWN"
    return EndpointRow(address, port, status, where, cluster, has_port)


def _declared_rows(assignment: JsonObject) -> list[EndpointRow]:
    cluster = text(assignment, "cluster_name")
    return [
        _declared_row(cluster, _locality(obj(group, "locality")), lb_endpoint)
        for group in objs(assignment, "endpoints")
        for lb_endpoint in objs(group, "lb_endpoints")
    ]


def _groups(data: ProxyData) -> list[tuple[JsonObject, list[EndpointRow]]]:
    """(raw object, its rows): Envoy's cluster statuses, else the EDS assignments."""
    if data.cluster_statuses is not None:
        return [(status, _admin_rows(status)) for status in data.cluster_statuses]
    return [(cla, _declared_rows(cla)) for cla in data.dump.endpoints()]


def endpoint_rows(data: ProxyData, where: EndpointFilter) -> list[EndpointRow]:
    if data.cluster_statuses is None:  # istioctl's config-dump order: by cluster, as listed
        groups = sorted(_groups(data), key=lambda g: _cluster_key(g[0]))
        return [row for _, rows in groups for row in rows if where.matches(row)]
    rows = [row for _, rows in _groups(data) for row in rows if where.matches(row)]
    return sorted(rows, key=lambda r: (r.address, r.port, r.cluster))


def _cluster_key(assignment: JsonObject) -> tuple[str, str, int, str]:
    return ClusterName.parse(text(assignment, "cluster_name")).sort_key


def select_endpoints(data: ProxyData, where: EndpointFilter) -> list[JsonObject]:
    """The raw cluster statuses with at least one matching endpoint; or, as istioctl does
    for a config dump, the assignments cut to their matching endpoints, in table order."""
    if data.cluster_statuses is not None:
        return [raw for raw, rows in _groups(data) if any(where.matches(r) for r in rows)]
    found = [_matching(cla, where) for cla in data.dump.endpoints()]
    return sorted((cla for cla in found if _declared_rows(cla)), key=_cluster_key)


def _matching(assignment: JsonObject, where: EndpointFilter) -> JsonObject:
    cluster = text(assignment, "cluster_name")

    def kept(group: JsonObject) -> JsonObject:
        locality = _locality(obj(group, "locality"))
        lb_endpoints = [
            e for e in objs(group, "lb_endpoints")
            if where.matches(_declared_row(cluster, locality, e))
        ]  # fmt: skip
        return {**group, "lb_endpoints": lb_endpoints}

    return {**assignment, "endpoints": [kept(g) for g in objs(assignment, "endpoints")]}


def endpoint_table(data: ProxyData, where: EndpointFilter) -> Table:
    columns = COLUMNS if data.cluster_statuses is not None else EDS_COLUMNS
    return Table.of(columns, (row.cells() for row in endpoint_rows(data, where)))
