"""`proxy-config routes`: istioctl's summary, one row per route (NAME, VHOST NAME, DOMAINS,
MATCH, VIRTUAL SERVICE; passthrough routes left out, an empty virtual host as `/*` → 404),
or without --verbose one per route configuration (NAME, VIRTUAL HOSTS); filter --name."""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.proxyinfo.dump import ConfigDump
from meshpilot.proxyinfo.fields import JsonObject, obj, objs, strings, text
from meshpilot.proxyinfo.provenance import config_owner
from meshpilot.proxyinfo.route_text import describe_domains, describe_match, route_cluster
from meshpilot.proxyinfo.table import Table
from meshpilot.xds.names import PASSTHROUGH_CLUSTER

__all__ = ["RouteFilter", "route_table", "select_routes"]

VERBOSE_COLUMNS = ("NAME", "VHOST NAME", "DOMAINS", "MATCH", "VIRTUAL SERVICE")
SHORT_COLUMNS = ("NAME", "VIRTUAL HOSTS")


@dataclass(frozen=True, slots=True)
class RouteFilter:
    name: str = ""

    def matches(self, config: JsonObject) -> bool:
        return not self.name or text(config, "name") == self.name


def _sort_key(config: JsonObject) -> tuple[int, int, str]:
    """Port-named configurations by number, then other names, then unnamed inline ones."""
    name = text(config, "name")
    if name.isdigit():
        return 0, int(name), ""
    return (1, 0, name) if name else (2, 0, "")


def select_routes(dump: ConfigDump, where: RouteFilter) -> list[JsonObject]:
    return sorted((r for r in dump.routes() if where.matches(r)), key=_sort_key)


def _rows(config: JsonObject) -> list[tuple[str, ...]]:
    name = text(config, "name")
    rows: list[tuple[str, ...]] = []
    for vhost in objs(config, "virtual_hosts"):
        vhost_name, domains = text(vhost, "name"), describe_domains(strings(vhost, "domains"))
        vhost_name = vhost_name.removeprefix(f"{name}/")  # VHDS names (discovery --vhds)
        routes = objs(vhost, "routes")
        for route in routes:
            if route_cluster(route) != PASSTHROUGH_CLUSTER:
                match = describe_match(obj(route, "match"))
                rows.append(
                    (name, vhost_name, domains, match, config_owner(obj(route, "metadata")))
                )
        if not routes:
            rows.append((name, vhost_name, domains, "/*", "404"))
    return rows


def route_table(dump: ConfigDump, where: RouteFilter, verbose: bool = True) -> Table:
    configs = select_routes(dump, where)
    if not verbose:
        short = ((text(c, "name"), str(len(objs(c, "virtual_hosts")))) for c in configs)
        return Table.of(SHORT_COLUMNS, short)
    return Table.of(VERBOSE_COLUMNS, (row for c in configs for row in _rows(c)))
