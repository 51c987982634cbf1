"""`proxy-config endpoints`: istioctl's summary (ENDPOINT, STATUS, OUTLIER CHECK, CLUSTER)
and filters (--address, --port, --cluster, --status).

From Envoy's admin the rows come from `/clusters?format=json` (health as Envoy sees it,
outlier detection included); from the control plane they come from the EDS assignments it
would send, where the health is the one it declares and the outlier check is unknown (-).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.proxyinfo.fields import JsonObject, flag, integer, obj, objs, text
from meshpilot.proxyinfo.source import ProxyData
from meshpilot.proxyinfo.table import Table

__all__ = [
    "COLUMNS",
    "EndpointFilter",
    "EndpointRow",
    "endpoint_rows",
    "endpoint_table",
    "select_endpoints",
]

COLUMNS = ("ENDPOINT", "STATUS", "OUTLIER CHECK", "CLUSTER")


@dataclass(frozen=True, slots=True)
class EndpointRow:
    address: str
    port: int
    status: str
    outlier_check: str  # OK, FAILED, or - when unknown
    cluster: str

    @property
    def endpoint(self) -> str:
        return f"{self.address}:{self.port}" if self.port else self.address

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


def _address(address: JsonObject) -> tuple[str, int]:
    if socket := obj(address, "socket_address"):
        return text(socket, "address"), integer(socket, "port_value")
    return "unix://" + text(address, "pipe", "path"), 0


def _admin_rows(status: JsonObject) -> list[EndpointRow]:
    rows = []
    for host in objs(status, "host_statuses"):
        address, port = _address(obj(host, "address"))
        health = obj(host, "health_status")
        outlier = "FAILED" if flag(health, "failed_outlier_check") else "OK"
        eds_status = text(health, "eds_health_status") or "UNKNOWN"
        rows.append(EndpointRow(address, port, eds_status, outlier, text(status, "name")))
    return rows


def _declared_rows(assignment: JsonObject) -> list[EndpointRow]:
    rows = []
    for locality in objs(assignment, "endpoints"):
        for lb_endpoint in objs(locality, "lb_endpoints"):
            address, port = _address(obj(lb_endpoint, "endpoint", "address"))
            declared = text(lb_endpoint, "health_status")
            # Envoy treats UNKNOWN (the default) as healthy, and shows it as HEALTHY.
            status = declared if declared and declared != "UNKNOWN" else "HEALTHY"
            rows.append(EndpointRow(address, port, status, "-", text(assignment, "cluster_name")))
    return rows


def _groups(data: ProxyData) -> list[tuple[JsonObject, list[EndpointRow]]]:
    """(raw object, its rows): Envoy's cluster statuses, else the EDS assignments."""
    if data.cluster_statuses is not None:
        return [(status, _admin_rows(status)) for status in data.cluster_statuses]
    return [(cla, _declared_rows(cla)) for cla in data.dump.endpoints()]


def endpoint_rows(data: ProxyData, where: EndpointFilter) -> list[EndpointRow]:
    rows = [row for _, rows in _groups(data) for row in rows if where.matches(row)]
    return sorted(rows, key=lambda r: (r.address, r.port, r.cluster))


def select_endpoints(data: ProxyData, where: EndpointFilter) -> list[JsonObject]:
    """The raw cluster statuses (or assignments) with at least one matching endpoint."""
    return [raw for raw, rows in _groups(data) if any(where.matches(r) for r in rows)]


def endpoint_table(data: ProxyData, where: EndpointFilter) -> Table:
    return Table.of(COLUMNS, (row.cells() for row in endpoint_rows(data, where)))
