"""What `meshpilot proxy-status` and `meshpilot proxy-config` show, as istioctl shows it.

fetch.py            GET JSON with a timeout; one-line FetchError naming server and URL
fields.py           typed reads from foreign JSON (missing fields read as empty)
source.py           a proxy's config: Envoy admin (/config_dump, /clusters) or the
                    control plane (/debug/config_dump?proxyID=), named in a header line
dump.py             the sections of a config dump (dynamic, then static resources)
clusters.py         SERVICE FQDN | PORT | SUBSET | DIRECTION | TYPE | DESTINATION RULE
listeners.py        ADDRESSES | PORT | MATCH | DESTINATION (listener_chains.py: the words)
routes.py           NAME | VHOST NAME | DOMAINS | MATCH | VIRTUAL SERVICE (route_text.py)
endpoints.py        ENDPOINT | STATUS | OUTLIER CHECK | CLUSTER
secrets.py          RESOURCE NAME | TYPE | STATUS | VALID CERT | SERIAL NUMBER | NOT AFTER...
status.py           /debug/syncz: NAME | CLUSTER | CDS | LDS | EDS | RDS | ECDS | ISTIOD | ...
provenance.py       the Istio object behind a resource (`name.namespace`)
table.py, formats.py, redact.py   tables, -o json|yaml, private keys never printed
"""

from __future__ import annotations

from meshpilot.proxyinfo.clusters import ClusterFilter, cluster_table, select_clusters
from meshpilot.proxyinfo.dump import ConfigDump, ConfigDumpError
from meshpilot.proxyinfo.endpoints import EndpointFilter, endpoint_table, select_endpoints
from meshpilot.proxyinfo.fetch import DEFAULT_TIMEOUT, FetchError
from meshpilot.proxyinfo.formats import OUTPUTS, render_raw
from meshpilot.proxyinfo.listeners import ListenerFilter, listener_table, select_listeners
from meshpilot.proxyinfo.redact import redact_private_keys
from meshpilot.proxyinfo.routes import RouteFilter, route_table, select_routes
from meshpilot.proxyinfo.secrets import secret_table
from meshpilot.proxyinfo.source import ProxyData, from_admin, from_control_plane
from meshpilot.proxyinfo.status import ProxySync, find_proxy, read_syncz, sync_detail, sync_table
from meshpilot.proxyinfo.table import Table

__all__ = [
    "DEFAULT_TIMEOUT",
    "OUTPUTS",
    "ClusterFilter",
    "ConfigDump",
    "ConfigDumpError",
    "EndpointFilter",
    "FetchError",
    "ListenerFilter",
    "ProxyData",
    "ProxySync",
    "RouteFilter",
    "Table",
    "cluster_table",
    "endpoint_table",
    "find_proxy",
    "from_admin",
    "from_control_plane",
    "listener_table",
    "read_syncz",
    "redact_private_keys",
    "render_raw",
    "route_table",
    "secret_table",
    "select_clusters",
    "select_endpoints",
    "select_listeners",
    "select_routes",
    "sync_detail",
    "sync_table",
]
