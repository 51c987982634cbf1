"""`proxy-config --file DUMP.json`: a proxy's configuration saved earlier, as istioctl's
`proxy-config ... -f` reads it, with no control plane and no Envoy running.

The file is Envoy's `/config_dump` (endpoints are in it only when it was taken with
`?include_eds`), the control plane's `/debug/config_dump` (same shape), or, for the
endpoints table, Envoy's `/clusters?format=json` (health included), as istioctl takes it.
"""

from __future__ import annotations

import json
from pathlib import Path

from meshpilot.errors import MeshpilotError
from meshpilot.proxyinfo.dump import ConfigDump, ConfigDumpError
from meshpilot.proxyinfo.fields import objs
from meshpilot.proxyinfo.source import ProxyData

__all__ = ["NO_ENDPOINTS", "from_file", "has_endpoints"]

NO_ENDPOINTS = (
    "{path} has no endpoints: Envoy's /config_dump lists them only when asked with "
    "?include_eds (curl 'localhost:15000/config_dump?include_eds'); "
    "or give Envoy's /clusters?format=json output"
)


def from_file(path: str, proxy_id: str | None, endpoints_only: bool = False) -> ProxyData:
    """The file's dump; MeshpilotError naming the file if it cannot be read or is no dump."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise MeshpilotError(f"--file {path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise MeshpilotError(f"--file {path}: cannot read it: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise MeshpilotError(f"--file {path}: not JSON ({exc})") from exc
    if isinstance(data, dict) and "cluster_statuses" in data and "configs" not in data:
        if not endpoints_only:
            raise ConfigDumpError(
                f"{path} is Envoy's /clusters output, which has only endpoints; the other "
                "tables need a /config_dump"
            )
        source = f"Source: file {path} (Envoy /clusters?format=json)"
        return ProxyData(source, ConfigDump({"configs": []}), objs(data, "cluster_statuses"))
    dump = ConfigDump.parse(data, path)
    node = dump.node_id
    warnings: tuple[str, ...] = ()
    if proxy_id and node and f"~{proxy_id}~" not in node:
        warnings = (f"warning: {path} is the config of node {node}, not {proxy_id}",)
    return ProxyData(
        f"Source: file {path}" + (f" (node {node})" if node else ""), dump, None, warnings
    )


def has_endpoints(data: ProxyData) -> bool:
    """Whether the endpoints table has a source: health statuses or an EDS section."""
    return data.cluster_statuses is not None or bool(data.dump.section("EndpointsConfigDump"))
