"""The proxy agent (pilot-agent): Envoy's bootstrap, process, readiness, drain.

options.py        AgentOptions: the proxy's identity, capture mode, ports, control plane
bootstrap.py      AgentOptions -> envoy.config.bootstrap.v3.Bootstrap (pure)
stats_config.py   Istio's stat tags and stats inclusion list
envoy_process.py  Envoy's command line; spawn, restart with backoff, stop
admin.py          async client of Envoy's admin API
health.py         status server (15020) and readiness probe for /healthz/ready
drain.py          graceful drain on termination
ca_client.py      client of the control plane's CA (Istio's CA API on 15012, TLS + token)
sds.py            SDS server (SotW + Delta) on Envoy's sds-grpc Unix socket
certs/            workload key and CSR, certificate checks, rotation, served secrets
agent.py          ProxyAgent: all of the above, with signal handling
"""

from meshpilot.agent.agent import ProxyAgent, RuntimeOptions
from meshpilot.agent.bootstrap import build_bootstrap
from meshpilot.agent.options import AgentOptions, InterceptionMode, XdsType

__all__ = [
    "AgentOptions",
    "InterceptionMode",
    "ProxyAgent",
    "RuntimeOptions",
    "XdsType",
    "build_bootstrap",
]
