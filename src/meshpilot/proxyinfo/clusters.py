"""`proxy-config clusters`: istioctl's summary (SERVICE FQDN, PORT, SUBSET, DIRECTION, TYPE,
DESTINATION RULE) and its filters (--fqdn, --port, --subset, --direction)."""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.proxyinfo.dump import ConfigDump
from meshpilot.proxyinfo.fields import JsonObject, obj, text
from meshpilot.proxyinfo.provenance import config_owner
from meshpilot.proxyinfo.table import Table

__all__ = ["COLUMNS", "ClusterFilter", "ClusterName", "cluster_table", "select_clusters"]

COLUMNS = ("SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE", "DESTINATION RULE")


@dataclass(frozen=True, slots=True)
class ClusterName:
    """An Istio cluster name `direction|port|subset|host` taken apart; other names (static
    clusters, BlackHoleCluster...) are all host."""

    direction: str
    port: int
    subset: str
    host: str
    istio: bool

    @classmethod
    def parse(cls, name: str) -> ClusterName:
        parts = name.split("|")
        if len(parts) < 4:
            return cls("", 0, "", name, istio=False)
        port = int(parts[1]) if parts[1].isdigit() else 0
        return cls(parts[0], port, parts[2], parts[3], istio=True)

    @property
    def sort_key(self) -> tuple[str, str, int, str]:
        return self.host, self.subset, self.port, self.direction


@dataclass(frozen=True, slots=True)
class ClusterFilter:
    fqdn: str = ""
    port: int = 0
    subset: str = ""
    direction: str = ""

    def matches(self, cluster: JsonObject) -> bool:
        """istioctl's rule: each given field is a substring of the cluster name."""
        name = text(cluster, "name")
        if self.fqdn and self.fqdn not in name:
            return False
        if self.direction and self.direction not in name:
            return False
        if self.subset and self.subset not in name:
            return False
        return not (self.port and f"|{self.port}|" not in name)


def select_clusters(dump: ConfigDump, where: ClusterFilter) -> list[JsonObject]:
    """The matching clusters, sorted as istioctl sorts them (host, subset, port, direction)."""
    found = [c for c in dump.clusters() if where.matches(c)]
    return sorted(found, key=lambda c: ClusterName.parse(text(c, "name")).sort_key)


def _row(cluster: JsonObject) -> tuple[str, ...]:
    name = ClusterName.parse(text(cluster, "name"))
    kind = text(cluster, "type") or "STATIC"  # proto JSON omits the default
    owner = config_owner(obj(cluster, "metadata"))
    if not name.istio:
        return name.host, "-", "-", "-", kind, owner
    return name.host, str(name.port), name.subset or "-", name.direction, kind, owner


def cluster_table(dump: ConfigDump, where: ClusterFilter) -> Table:
    return Table.of(COLUMNS, (_row(c) for c in select_clusters(dump, where)))
