"""Route configurations (RDS) and the VirtualService HTTP route translation.

sidecar.py        one RouteConfiguration per outbound HTTP port
virtual_hosts.py  virtual host names and domains
encoded.py        a VirtualService's sidecar routes, serialized once per proxy for all ports
plain_route.py    plain routes (destinations, timeout, retries, hashing) written as bytes
assembly.py       route configs assembled from serialized routes and virtual hosts
http_route.py     VirtualService HTTP routes -> Envoy routes (shared with gateways)
delegate.py       short-name resolution and delegate VirtualService merging
match.py          route matches
action.py         route actions: destinations, timeout, rewrite, mirrors, retries
redirect.py       redirect and direct-response actions
headers.py        header operations
policies.py       fault injection and CORS per-route configs
retry.py          retry policies
hash_policy.py    consistent-hash keys from DestinationRules
context.py        what one VirtualService translation needs to know
"""

from __future__ import annotations

from meshpilot.xds.generate.routes.http_route import build_http_routes
from meshpilot.xds.generate.routes.sidecar import generate_sidecar_routes

__all__ = ["build_http_routes", "generate_sidecar_routes"]
