"""Route actions: clusters and weights, port defaulting, timeout, retries, rewrite, redirect,
direct response, mirrors and consistent-hash policies."""

from __future__ import annotations

import pytest
from rds_helpers import SERVICES, pod, push_of, route_config, vhost

pytestmark = pytest.mark.envoy  # every route config goes through Envoy

CLIENT = pod("client", labels="{app: productpage, version: v1}")
REVIEWS = "reviews.default.svc.cluster.local:9080"


def vs(http: str, name: str = "reviews", hosts: str = "[reviews]") -> str:
    return f"""
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: default}}
spec:
  hosts: {hosts}
  http:
{http}"""


def first_route(http: str, *docs: str) -> dict:
    config = route_config(push_of(SERVICES, CLIENT, vs(http), *docs), 9080)
    return vhost(config, REVIEWS)["routes"][0]


def test_weighted_clusters_drop_zero_weights_and_keep_given_weights():
    route = first_route("""
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 70
    - destination: {host: reviews, subset: v2}
      weight: 0
    - destination: {host: ratings}
      weight: 30
""")
    assert route["route"]["weighted_clusters"] == {
        "clusters": [
            {"name": "outbound|9080|v1|reviews.default.svc.cluster.local", "weight": 70},
            {"name": "outbound|9080||ratings.default.svc.cluster.local", "weight": 30},
        ]
    }
    # Several clusters: the trace operation names the VirtualService.
    assert route["decorator"]["operation"] == "reviews:9080/*"


def test_destination_port_explicit_else_listener_port_for_sidecars():
    route = first_route("""
  - route:
    - destination: {host: details.other.svc.cluster.local, port: {number: 9090}}
      weight: 50
    - destination: {host: details.other.svc.cluster.local}
      weight: 50
""")
    names = [c["name"] for c in route["route"]["weighted_clusters"]["clusters"]]
    assert names == [
        "outbound|9090||details.other.svc.cluster.local",
        "outbound|9080||details.other.svc.cluster.local",
    ]


def test_short_destination_hosts_resolve_in_the_virtual_service_namespace():
    vs_other = """
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: other}
spec:
  hosts: [details]
  http:
  - route: [{destination: {host: details, subset: v1}}]
"""
    config = route_config(push_of(SERVICES, CLIENT, vs_other), 9080)
    route = vhost(config, "details.other.svc.cluster.local:9080")["routes"][0]
    assert route["route"]["cluster"] == "outbound|9080|v1|details.other.svc.cluster.local"


def test_timeout_and_grpc_timeout():
    route = first_route("""
  - timeout: 2.5s
    route: [{destination: {host: reviews}}]
""")
    assert route["route"]["timeout"] == "2.500s"
    assert route["route"]["max_grpc_timeout"] == "2.500s"


def test_retries_with_status_codes_and_per_try_timeout():
    route = first_route("""
  - retries: {attempts: 4, perTryTimeout: 1s, retryOn: "gateway-error,503,connect-failure"}
    route: [{destination: {host: reviews}}]
""")
    policy = route["route"]["retry_policy"]
    assert policy["retry_on"] == "gateway-error,connect-failure,retriable-status-codes"
    assert policy["retriable_status_codes"] == [503]
    assert policy["num_retries"] == 4
    assert policy["per_try_timeout"] == "1s"
    assert policy["host_selection_retry_max_attempts"] == "5"


def test_zero_attempts_means_no_retry_policy():
    route = first_route("""
  - retries: {attempts: 0}
    route: [{destination: {host: reviews}}]
""")
    assert "retry_policy" not in route["route"]


def test_retry_remote_localities_sets_previous_priorities():
    route = first_route("""
  - retries: {attempts: 2, retryRemoteLocalities: true}
    route: [{destination: {host: reviews}}]
""")
    assert route["route"]["retry_policy"]["retry_priority"] == {
        "name": "envoy.retry_priorities.previous_priorities",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.retry.priority.previous_priorities."
            "v3.PreviousPrioritiesConfig",
            "update_frequency": 2,
        },
    }


def test_rewrite_uri_authority_and_regex():
    route = first_route("""
  - match: [{uri: {exact: /old}}]
    rewrite: {uri: /new, authority: backend.internal}
    route: [{destination: {host: reviews}}]
  - rewrite:
      uriRegexRewrite: {match: "^/v1/(.*)", rewrite: "/\\\\1"}
    route: [{destination: {host: reviews}}]
""")
    assert route["route"]["prefix_rewrite"] == "/new"
    assert route["route"]["host_rewrite_literal"] == "backend.internal"
    config = route_config(
        push_of(
            SERVICES,
            CLIENT,
            vs("""
  - rewrite:
      uriRegexRewrite: {match: "^/v1/(.*)", rewrite: "/\\\\1"}
    route: [{destination: {host: reviews}}]
"""),
        ),
        9080,
    )
    regex = vhost(config, REVIEWS)["routes"][0]["route"]["regex_rewrite"]
    assert regex == {"pattern": {"regex": "^/v1/(.*)"}, "substitution": "/\\1"}


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (0, None),
        (301, None),
        (302, "FOUND"),
        (303, "SEE_OTHER"),
        (307, "TEMPORARY_REDIRECT"),
        (308, "PERMANENT_REDIRECT"),
    ],
)
def test_redirect_codes(code, expected):
    route = first_route(f"""
  - redirect: {{uri: /moved, authority: new.example.com, redirectCode: {code}}}
""")
    redirect = route["redirect"]
    assert redirect.get("response_code") == expected  # MOVED_PERMANENTLY is the default
    assert redirect["path_redirect"] == "/moved"
    assert redirect["host_redirect"] == "new.example.com"
    assert route["decorator"]["operation"] == "reviews:9080/*"
    assert "route" not in route


def test_redirect_port_and_scheme():
    route = first_route("""
  - redirect: {uri: /x, scheme: https, port: 8443}
""")
    assert route["redirect"]["scheme_redirect"] == "https"
    assert route["redirect"]["port_redirect"] == 8443
    # The scheme's default port is left implicit.
    route = first_route("""
  - redirect: {uri: /x, port: 80}
""")
    assert "port_redirect" not in route["redirect"]
    route = first_route("""
  - redirect: {uri: /x, derivePort: FROM_REQUEST_PORT}
""")
    assert route["redirect"]["port_redirect"] == 9080


def test_unsupported_redirect_code_drops_the_route():
    config = route_config(
        push_of(
            SERVICES,
            CLIENT,
            vs("""
  - match: [{uri: {prefix: /a}}]
    redirect: {uri: /x, redirectCode: 305}
  - route: [{destination: {host: reviews, subset: v1}}]
"""),
        ),
        9080,
    )
    routes = vhost(config, REVIEWS)["routes"]
    assert [r["route"]["cluster"] for r in routes] == [
        "outbound|9080|v1|reviews.default.svc.cluster.local"
    ]


def test_direct_response_string_and_bytes():
    route = first_route("""
  - match: [{uri: {prefix: /a}}]
    directResponse: {status: 418, body: {string: "teapot"}}
""")
    assert route["direct_response"] == {"status": 418, "body": {"inline_string": "teapot"}}
    route = first_route("""
  - directResponse: {status: 200, body: {bytes: "aGVsbG8="}}
""")
    assert route["direct_response"] == {"status": 200, "body": {"inline_bytes": "aGVsbG8="}}


def test_mirror_and_mirrors_with_percentages():
    route = first_route("""
  - route: [{destination: {host: reviews, subset: v1}}]
    mirror: {host: ratings}
    mirrorPercentage: {value: 12.5}
""")
    assert route["route"]["request_mirror_policies"] == [
        {
            "cluster": "outbound|9080||ratings.default.svc.cluster.local",
            "runtime_fraction": {"default_value": {"numerator": 125000, "denominator": "MILLION"}},
            "trace_sampled": False,
        }
    ]
    route = first_route("""
  - route: [{destination: {host: reviews, subset: v1}}]
    mirrors:
    - destination: {host: reviews, subset: shadow}
    - destination: {host: details.other.svc.cluster.local}
      percentage: {value: 0}
""")
    assert route["route"]["request_mirror_policies"] == [
        {
            "cluster": "outbound|9080|shadow|reviews.default.svc.cluster.local",
            "runtime_fraction": {"default_value": {"numerator": 100}},
            "trace_sampled": False,
        },
    ]


def test_explicit_zero_mirror_percentage_disables_mirroring():
    route = first_route("""
  - route: [{destination: {host: reviews}}]
    mirror: {host: ratings}
    mirrorPercentage: {value: 0}
""")
    assert "request_mirror_policies" not in route["route"]


DR_HASH = """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  trafficPolicy:
    loadBalancer:
      consistentHash: {httpCookie: {name: session, path: /, ttl: 60s}}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      loadBalancer:
        consistentHash: {useSourceIp: true}
  - name: v2
    labels: {version: v2}
"""


def test_hash_policy_from_destination_rule_subset_first():
    route = first_route(
        """
  - route: [{destination: {host: reviews, subset: v1}}]
""",
        DR_HASH,
    )
    assert route["route"]["hash_policy"] == [{"connection_properties": {"source_ip": True}}]
    # Consistent hashing keeps retries on the same host: no previous_hosts predicate.
    assert "retry_host_predicate" not in route["route"]["retry_policy"]


def test_hash_policy_cookie_and_query_parameter():
    route = first_route(
        """
  - route: [{destination: {host: reviews, subset: v2}}]
""",
        DR_HASH,
    )
    assert route["route"]["hash_policy"] == [
        {"cookie": {"name": "session", "path": "/", "ttl": "60s"}}
    ]
    query = DR_HASH.replace(
        "{httpCookie: {name: session, path: /, ttl: 60s}}", "{httpQueryParameterName: user}"
    )
    route = first_route(
        """
  - route: [{destination: {host: reviews, subset: v2}}]
""",
        query,
    )
    assert route["route"]["hash_policy"] == [{"query_parameter": {"name": "user"}}]


def test_weighted_destinations_each_add_their_hash_policy():
    route = first_route(
        """
  - route:
    - destination: {host: reviews, subset: v1}
      weight: 50
    - destination: {host: reviews, subset: v2}
      weight: 50
""",
        DR_HASH,
    )
    assert route["route"]["hash_policy"] == [
        {"connection_properties": {"source_ip": True}},
        {"cookie": {"name": "session", "path": "/", "ttl": "60s"}},
    ]
    # Istio only drops previous_hosts for a single hashed destination.
    assert route["route"]["retry_policy"]["retry_host_predicate"]


DR_PORT_HASH = """
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: details, namespace: other}
spec:
  host: details
  trafficPolicy:
    loadBalancer:
      consistentHash: {httpHeaderName: x-top}
    portLevelSettings:
    - port: {number: 9090}
      loadBalancer:
        consistentHash: {httpHeaderName: x-port}
"""


def test_port_level_hash_needs_an_explicit_destination_port():
    route = first_route(
        """
  - match: [{uri: {prefix: /a}}]
    route: [{destination: {host: details.other.svc.cluster.local, port: {number: 9090}}}]
  - route: [{destination: {host: details.other.svc.cluster.local}}]
""",
        DR_PORT_HASH,
    )
    assert route["route"]["hash_policy"] == [{"header": {"header_name": "x-port"}}]
    config = route_config(
        push_of(
            SERVICES,
            CLIENT,
            DR_PORT_HASH,
            vs("""
  - route: [{destination: {host: details.other.svc.cluster.local}}]
"""),
        ),
        9080,
    )
    route = vhost(config, REVIEWS)["routes"][0]
    assert route["route"]["hash_policy"] == [{"header": {"header_name": "x-top"}}]


def test_default_route_hash_uses_the_port_level_setting_of_its_port():
    configs = {
        port: route_config(push_of(SERVICES, CLIENT, DR_PORT_HASH), port) for port in (9080, 9090)
    }
    hashes = {
        port: vhost(c, f"details.other.svc.cluster.local:{port}")["routes"][0]["route"][
            "hash_policy"
        ]
        for port, c in configs.items()
    }
    assert hashes == {
        9080: [{"header": {"header_name": "x-top"}}],
        9090: [{"header": {"header_name": "x-port"}}],
    }
