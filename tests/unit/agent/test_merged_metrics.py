"""The merged endpoint's pure parts: the app's scrape target from Istio's
ISTIO_PROMETHEUS_ANNOTATIONS, and Istio's names for the metrics stock Envoy prefixes."""

from __future__ import annotations

import pytest

from meshpilot.agent.merged_metrics import AppScrape, app_scrape, istio_names
from meshpilot.errors import MeshpilotError


def test_annotations_give_the_apps_url() -> None:
    found = app_scrape('{"scrape":"true","port":"8080","path":"/stats"}')
    assert found == AppScrape(8080, "/stats")
    assert found.url == "http://127.0.0.1:8080/stats"
    assert app_scrape('{"scrape":"true","port":"9090"}') == AppScrape(9090, "/metrics")
    assert app_scrape('{"scrape":"false","port":"9090"}') is None
    assert app_scrape("") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{scrape", "ISTIO_PROMETHEUS_ANNOTATIONS is not JSON: "),
        ('["scrape"]', "ISTIO_PROMETHEUS_ANNOTATIONS must be a JSON object"),
        ('{"scrape":"true","port":"70000"}', "ISTIO_PROMETHEUS_ANNOTATIONS: invalid port '70000'"),
    ],
)
def test_bad_annotations_say_what_is_wrong(value: str, message: str) -> None:
    with pytest.raises(MeshpilotError, match="^" + message.replace("[", r"\[")):
        app_scrape(value)


def test_envoys_prefix_of_istio_metrics_is_dropped() -> None:
    envoy = (
        "# HELP envoy_istio_requests_total\n"
        "# TYPE envoy_istio_requests_total counter\n"
        'envoy_istio_requests_total{reporter="source"} 3\n'
        'envoy_istio_request_duration_milliseconds_bucket{le="1"} 1\n'
        "envoy_server_live 1\n"
        'envoy_cluster_upstream_rq{envoy_cluster_name="envoy_istio_x"} 1\n'
    )
    assert istio_names(envoy) == (
        "# HELP istio_requests_total\n"
        "# TYPE istio_requests_total counter\n"
        'istio_requests_total{reporter="source"} 3\n'
        'istio_request_duration_milliseconds_bucket{le="1"} 1\n'
        "envoy_server_live 1\n"
        'envoy_cluster_upstream_rq{envoy_cluster_name="envoy_istio_x"} 1\n'
    )
