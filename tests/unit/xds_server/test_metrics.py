"""Metrics render in the Prometheus text format under Istio's names (no `_total`)."""

from __future__ import annotations

from meshpilot.xds.metrics import Metrics


def test_istio_names_and_text_format() -> None:
    metrics = Metrics()
    metrics.pushes.inc("cds")
    metrics.pushes.inc("cds")
    metrics.rejects.inc("lds")
    metrics.xds_clients.set("1.28.0", value=3)
    metrics.convergence.observe(0.2)
    metrics.push_time.observe(0.005, "eds")
    text = metrics.render()
    lines = text.splitlines()
    assert "# TYPE pilot_xds_pushes counter" in lines
    assert 'pilot_xds_pushes{type="cds"} 2' in lines
    assert 'pilot_total_xds_rejects{type="lds"} 1' in lines
    assert 'pilot_xds{version="1.28.0"} 3' in lines
    assert 'pilot_proxy_convergence_time_bucket{le="0.1"} 0' in lines
    assert 'pilot_proxy_convergence_time_bucket{le="0.5"} 1' in lines
    assert 'pilot_proxy_convergence_time_bucket{le="+Inf"} 1' in lines
    assert "pilot_proxy_convergence_time_count 1" in lines
    assert 'pilot_xds_push_time_bucket{type="eds",le="0.01"} 1' in lines
    assert not [line for line in lines if line.split("{")[0].split(" ")[0].endswith("_total")]
    for name in ("pilot_k8s_cfg_events", "pilot_push_triggers", "pilot_xds_expired_nonce"):
        assert f"# TYPE {name} counter" in lines


def test_label_values_are_escaped() -> None:
    metrics = Metrics()
    metrics.config_events.inc('Virtual"Service', "add")
    assert 'pilot_k8s_cfg_events{type="Virtual\\"Service",event="add"} 1' in metrics.render()
