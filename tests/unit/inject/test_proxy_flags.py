"""Per-pod proxy settings that reach the agent as flags: Istio's statsInclusionPrefixes
annotation, a terminationDrainDuration of proxy.istio.io/config, SECRET_TTL by
proxyMetadata (the agent reads it from its environment, as pilot-agent)."""

from __future__ import annotations

import copy
from typing import Any

from click.testing import CliRunner

from meshpilot.cli.proxy import proxy
from meshpilot.inject.config import parse_injector
from meshpilot.inject.pod import inject_pod

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "labels": {"app": "web", "sidecar.istio.io/inject": "true"},
        "annotations": {
            "sidecar.istio.io/statsInclusionPrefixes": "cluster.outbound, http.",
            "proxy.istio.io/config": '{"terminationDrainDuration": "250ms", '
            '"proxyMetadata": {"SECRET_TTL": "1h"}}',
        },
    },
    "spec": {"containers": [{"name": "web", "image": "web:1"}]},
}


def _proxy(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "istio-proxy")


def test_annotations_become_agent_flags_and_env() -> None:
    proxy_container = _proxy(inject_pod(POD, parse_injector()).pod)
    args = proxy_container["args"]
    assert args[-6:] == [
        "--termination-drain-duration", "250ms",
        "--stats-inclusion-prefix", "cluster.outbound",
        "--stats-inclusion-prefix", "http.",
    ]  # fmt: skip
    assert {"name": "SECRET_TTL", "value": "1h"} in proxy_container["env"]


def test_defaults_add_no_flag() -> None:
    pod = copy.deepcopy(POD)
    pod["metadata"]["annotations"] = {}
    args = _proxy(inject_pod(pod, parse_injector()).pod)["args"]
    assert "--termination-drain-duration" not in args
    assert "--stats-inclusion-prefix" not in args


def test_agent_reads_secret_ttl_from_its_environment() -> None:
    sidecar = proxy.commands["sidecar"]
    option = next(p for p in sidecar.params if p.name == "secret_ttl")
    assert option.envvar == "SECRET_TTL"
    ctx = sidecar.make_context("sidecar", [], default_map=None)
    assert ctx.params["secret_ttl"] == "24h"
    with CliRunner().isolation(env={"SECRET_TTL": "1h"}):
        assert sidecar.make_context("sidecar", []).params["secret_ttl"] == "1h"
