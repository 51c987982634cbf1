"""Check generated configuration with `envoy --mode validate`.

The bootstrap carries the proxy's resources statically, exactly as generated: listeners and
clusters keep their ADS references (the bootstrap declares an ADS source that validation never
dials). Route configurations, which listeners reach by RDS, are also placed inline in extra
validation-only listeners, extension configs (ECDS) as inline HTTP filters of one more, and
load assignments in extra STATIC clusters, so that Envoy checks every resource of every type.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, config_source_pb2, extension_pb2, grpc_service_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import json_format

from meshpilot.envoy.binary import envoy_binary
from meshpilot.errors import EnvoyError
from meshpilot.xds.names import SDS_CLUSTER, WASM_FETCH_CLUSTER, XDS_CLUSTER
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.protos import Filters, duration, pack

__all__ = ["validate_bootstrap", "validate_config", "validation_bootstrap"]

_CHECK_PORT_BASE = 40000  # validation-only listeners never bind


def _static_cluster(name: str, address: str, port: int, http2: bool) -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=duration(1_000_000_000),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=name,
            endpoints=[
                endpoint_components_pb2.LocalityLbEndpoints(
                    lb_endpoints=[
                        endpoint_components_pb2.LbEndpoint(
                            endpoint=endpoint_components_pb2.Endpoint(
                                address=address_pb2.Address(
                                    socket_address=address_pb2.SocketAddress(
                                        address=address, port_value=port
                                    )
                                )
                            )
                        )
                    ]
                )
            ],
        ),
    )
    if http2:
        options = http_protocol_options_pb2.HttpProtocolOptions(
            explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
                http2_protocol_options={}
            )
        )
        cluster.typed_extension_protocol_options[
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
        ].CopyFrom(pack(options))
    return cluster


def _route_check_listener(
    index: int, route_config: object, extensions: Sequence[extension_pb2.TypedExtensionConfig] = ()
) -> listener_pb2.Listener:
    """A listener that never binds, holding a route config (RDS) inline, or (ECDS) HTTP
    filters configured inline with the extension configs."""
    filters = [hcm_pb2.HttpFilter(name=e.name, typed_config=e.typed_config) for e in extensions]
    hcm = hcm_pb2.HttpConnectionManager(
        stat_prefix=f"validate_routes_{index}",
        route_config=route_config,
        http_filters=[
            *filters,
            hcm_pb2.HttpFilter(name=Filters.ROUTER, typed_config=pack(router_pb2.Router())),
        ],
    )
    return listener_pb2.Listener(
        name=f"validate-routes-{index}",
        address=address_pb2.Address(
            socket_address=address_pb2.SocketAddress(
                address="127.0.0.1", port_value=_CHECK_PORT_BASE + index
            )
        ),
        bind_to_port={"value": False},
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[listener_components_pb2.Filter(name=Filters.HCM, typed_config=pack(hcm))]
            )
        ],
    )


def validation_bootstrap(
    config: ProxyConfig,
    node_id: str = "sidecar~127.0.0.1~validate.default~default.svc.cluster.local",
) -> bootstrap_pb2.Bootstrap:
    boot = bootstrap_pb2.Bootstrap()
    boot.node.id = node_id
    boot.node.cluster = "validate"
    ads = boot.dynamic_resources.ads_config
    ads.api_type = config_source_pb2.ApiConfigSource.GRPC
    ads.transport_api_version = config_source_pb2.V3
    ads.grpc_services.append(
        grpc_service_pb2.GrpcService(
            envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=XDS_CLUSTER)
        )
    )
    static = boot.static_resources
    static.listeners.extend(config.listeners)
    static.listeners.extend(_route_check_listener(i, rc) for i, rc in enumerate(config.routes))
    if config.extension_configs:
        index = len(config.routes)
        empty = route_pb2.RouteConfiguration(name="validate-ecds")
        static.listeners.append(_route_check_listener(index, empty, config.extension_configs))
    static.clusters.extend(config.clusters)
    names = {c.name for c in config.clusters}
    for name in (XDS_CLUSTER, SDS_CLUSTER, WASM_FETCH_CLUSTER):
        if name not in names:
            static.clusters.append(_static_cluster(name, "127.0.0.1", 1, http2=True))
    for i, cla in enumerate(config.endpoints):
        check = cluster_pb2.Cluster(
            name=f"validate-eds-{i}",
            type=cluster_pb2.Cluster.STATIC,
            connect_timeout=duration(1_000_000_000),
        )
        check.load_assignment.CopyFrom(cla)
        check.load_assignment.cluster_name = check.name
        static.clusters.append(check)
    static.secrets.extend(config.secrets)
    return boot


def validate_config(config: ProxyConfig, node_id: str | None = None, timeout: float = 60) -> None:
    """Raise EnvoyError with Envoy's own message if it rejects any resource."""
    validate_bootstrap(validation_bootstrap(config, *(node_id,) if node_id else ()), timeout)


def validate_bootstrap(boot: bootstrap_pb2.Bootstrap, timeout: float = 60) -> None:
    """Raise EnvoyError with Envoy's own message if it rejects this bootstrap."""
    text = json_format.MessageToJson(boot, preserving_proto_field_name=True)
    with tempfile.TemporaryDirectory(prefix="meshpilot-validate-") as tmp:
        path = Path(tmp) / "bootstrap.json"
        path.write_text(text)
        try:
            proc = subprocess.run(
                [
                    str(envoy_binary()),
                    "--mode",
                    "validate",
                    "-c",
                    str(path),
                    "-l",
                    "error",
                    "--log-format",
                    "%v",
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise EnvoyError(f"envoy --mode validate did not finish in {timeout}s") from exc
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise EnvoyError("Envoy rejected the configuration: " + " | ".join(detail[-5:]))
