"""Where `proxy-config` reads a proxy's configuration from, said in one header line:

- Envoy's admin (`--admin URL`): `/config_dump?include_eds`, plus `/clusters?format=json`
  for endpoint health: what the proxy actually runs;
- else the control plane's `/debug/config_dump?proxyID=<pod>.<ns>`: what the control plane
  would send that proxy now (no static bootstrap resources, no health).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from meshpilot.errors import ProxyNotFoundError
from meshpilot.proxyinfo.dump import ConfigDump
from meshpilot.proxyinfo.fetch import DEFAULT_TIMEOUT, FetchError, base_url, get_json
from meshpilot.proxyinfo.fields import JsonObject, objs

__all__ = ["ProxyData", "from_admin", "from_control_plane"]

ADMIN = "Envoy admin"
CONTROL_PLANE = "the control plane"


@dataclass(frozen=True, slots=True)
class ProxyData:
    source: str  # the header line
    dump: ConfigDump
    # Envoy's /clusters?format=json `cluster_statuses`; None when read from the control plane.
    cluster_statuses: list[JsonObject] | None = None
    warnings: tuple[str, ...] = ()


def from_admin(
    admin: str, proxy_id: str | None, health: bool, timeout: float = DEFAULT_TIMEOUT
) -> ProxyData:
    base = base_url(admin)
    dump = ConfigDump.parse(get_json(base, "/config_dump?include_eds", ADMIN, timeout), base)
    statuses = None
    if health:
        clusters = get_json(base, "/clusters?format=json", ADMIN, timeout)
        statuses = objs(clusters, "cluster_statuses")
    node = dump.node_id
    warnings: tuple[str, ...] = ()
    if proxy_id and node and f"~{proxy_id}~" not in node:
        warnings = (f"warning: the Envoy at {base} is node {node}, not {proxy_id}",)
    source = f"Source: Envoy admin {base}" + (f" (node {node})" if node else "")
    return ProxyData(source, dump, statuses, warnings)


def from_control_plane(
    discovery: str, proxy_id: str, proxy_type: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> ProxyData:
    base = base_url(discovery)
    target = f"/debug/config_dump?proxyID={quote(proxy_id)}"
    if proxy_type:
        target += f"&type={quote(proxy_type)}"
    try:
        data = get_json(base, target, CONTROL_PLANE, timeout)
    except FetchError as exc:
        if exc.status == 404:
            raise ProxyNotFoundError(
                f"unknown proxy {proxy_id}: the control plane at {base} has no connected "
                "proxy and no Pod of that name"
            ) from exc
        raise
    source = (
        f"Source: control plane {base}{target} (config generated for {proxy_id}; "
        "--admin URL reads the Envoy itself)"
    )
    return ProxyData(source, ConfigDump.parse(data, base + target))
