"""Gateway route configurations: virtual hosts per server host, redirects, merging."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as rc

from meshpilot.xds.generate.gateway import generate_gateway_routes
from tests.unit.gateway.meshes import gateway, gateway_config, load, route_config, virtual_service

HTTP = """
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [HOSTS]
"""


def http_gateway(name: str, namespace: str, hosts: str, redirect: bool = False) -> str:
    servers = HTTP.replace("HOSTS", hosts)
    if redirect:
        servers += "    tls: {httpsRedirect: true}\n"
    return gateway(name, namespace, servers)


def web_vs(name: str, namespace: str, hosts: str, gateways: str, prefix: str = "/") -> str:
    return virtual_service(
        name,
        namespace,
        f"""
  hosts: [{hosts}]
  gateways: [{gateways}]
  http:
  - match: [{{uri: {{prefix: "{prefix}"}}}}]
    route: [{{destination: {{host: web.shop.svc.cluster.local}}}}]
""",
    )


def vhosts(config: object, name: str = "http.8080") -> dict[str, rc.VirtualHost]:
    return {v.name: v for v in route_config(config, name).virtual_hosts}  # type: ignore[arg-type]


def clusters(vhost: rc.VirtualHost) -> list[str]:
    return [r.route.cluster for r in vhost.routes]


def test_virtual_host_per_server_host_with_bound_routes() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"a.example.com"'),
        web_vs("web", "shop", '"a.example.com"', '"gw"', "/app"),
    )
    rcfg = route_config(config, "http.8080")
    assert rcfg.validate_clusters.value is False
    assert rcfg.ignore_port_in_host_matching
    assert rcfg.max_direct_response_body_size_bytes.value == 1024 * 1024
    (vhost,) = rcfg.virtual_hosts
    assert vhost.name == "a.example.com:80"  # the server port, not the listener port
    assert list(vhost.domains) == ["a.example.com"]
    assert vhost.include_request_attempt_count
    assert vhost.require_tls == rc.VirtualHost.NONE
    assert [r.match.prefix for r in vhost.routes] == ["/app"]
    assert clusters(vhost) == ["outbound|8000||web.shop.svc.cluster.local"]


def test_https_redirect_requires_tls_on_the_virtual_host() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"a.example.com", "b.example.com"', redirect=True),
        web_vs("web", "shop", '"a.example.com"', '"gw"'),
    )
    hosts = vhosts(config)
    assert hosts["a.example.com:80"].require_tls == rc.VirtualHost.ALL
    assert clusters(hosts["a.example.com:80"]) == ["outbound|8000||web.shop.svc.cluster.local"]
    # A redirected host no VirtualService covers still gets a (route-less) virtual host.
    assert hosts["b.example.com:80"].require_tls == rc.VirtualHost.ALL
    assert not hosts["b.example.com:80"].routes


def test_no_bound_virtual_service_gives_the_blackhole_host() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"a.example.com"'),
        web_vs("mesh-only", "shop", '"a.example.com"', "mesh"),
    )
    (vhost,) = route_config(config, "http.8080").virtual_hosts
    assert vhost.name == "blackhole:80"
    assert list(vhost.domains) == ["*"] and not vhost.routes


def test_virtual_service_without_applicable_http_routes_adds_no_host() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"*"'),
        virtual_service(
            "tcp-only",
            "shop",
            """
  hosts: ["*"]
  gateways: ["gw"]
  tcp: [{route: [{destination: {host: db}}]}]
""",
        ),
        virtual_service(
            "other-port",
            "shop",
            """
  hosts: ["a.example.com"]
  gateways: ["gw"]
  http: [{match: [{port: 8080}], route: [{destination: {host: web}}]}]
""",
        ),
    )
    (vhost,) = route_config(config, "http.8080").virtual_hosts
    assert vhost.name == "blackhole:80"  # port matches compare with the server port, 80


def test_namespaced_server_hosts_only_take_virtual_services_from_that_namespace() -> None:
    config = gateway_config(
        http_gateway("gw", "istio-system", '"shop/a.example.com", "b.example.com"'),
        web_vs("in-shop", "shop", '"a.example.com", "b.example.com"', '"istio-system/gw"'),
        web_vs("elsewhere", "default", '"a.example.com"', '"istio-system/gw"', "/other"),
    )
    (vhost,) = route_config(config, "http.8080").virtual_hosts
    assert list(vhost.domains) == ["a.example.com", "b.example.com"]
    # The `default` VirtualService is not allowed on `shop/` hosts: only `/` routes.
    assert [r.match.prefix for r in vhost.routes] == ["/"]


def test_wildcards_intersect_to_the_narrower_host() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"*.example.com"'),
        web_vs("web", "shop", '"a.example.com"', '"gw"'),
    )
    assert list(vhosts(config)) == ["a.example.com:80"]


def test_hosts_sharing_routes_collapse_into_one_virtual_host() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"*"'),
        web_vs("web", "shop", '"a.example.com", "bb.example.com"', '"gw"'),
    )
    (vhost,) = route_config(config, "http.8080").virtual_hosts
    # Longest host first (Istio's host order), the other's domain joins it.
    assert vhost.name == "bb.example.com:80"
    assert list(vhost.domains) == ["bb.example.com", "a.example.com"]


def test_virtual_services_append_and_catch_all_goes_last() -> None:
    config = gateway_config(
        http_gateway("gw", "shop", '"a.example.com"'),
        web_vs("catch-all", "shop", '"a.example.com"', '"gw"', "/"),
        web_vs("specific", "shop", '"a.example.com"', '"gw"', "/api"),
    )
    (vhost,) = route_config(config, "http.8080").virtual_hosts
    assert [r.match.prefix for r in vhost.routes] == ["/api", "/"]


def test_servers_of_several_gateways_share_http_route_config() -> None:
    config = gateway_config(
        http_gateway("one", "shop", '"a.example.com"'),
        http_gateway("two", "istio-system", '"b.example.com"'),
        web_vs("web-a", "shop", '"a.example.com", "b.example.com"', '"one"', "/a"),
        web_vs("web-b", "shop", '"a.example.com", "b.example.com"', '"istio-system/two"', "/b"),
    )
    hosts = vhosts(config)
    # Each server only takes the VirtualServices bound to its own Gateway.
    assert [r.match.prefix for r in hosts["a.example.com:80"].routes] == ["/a"]
    assert [r.match.prefix for r in hosts["b.example.com:80"].routes] == ["/b"]


def test_https_route_config_serves_one_server() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["a.example.com"]
    tls: {mode: SIMPLE, credentialName: a}
""",
        ),
        web_vs("web", "shop", '"a.example.com"', '"gw"'),
    )
    (vhost,) = route_config(config, "https.443.https.gw.shop").virtual_hosts
    assert vhost.name == "a.example.com:443"


def test_unknown_route_name_gets_an_empty_config() -> None:
    push, proxy = load(http_gateway("gw", "shop", '"a.example.com"'))
    (rcfg,) = generate_gateway_routes(push, proxy, ["http.9999"])
    assert rcfg.name == "http.9999" and not rcfg.virtual_hosts
    assert rcfg.validate_clusters.value is False


def test_all_route_configs_when_no_names_are_given() -> None:
    push, proxy = load(http_gateway("gw", "shop", '"a.example.com"'))
    assert [r.name for r in generate_gateway_routes(push, proxy, None)] == ["http.8080"]
