"""Patched resources are cached consistently: proxies with the same generated resources and
the same filters share the patched messages; the key names the filters (name,
resourceVersion, generation, patch), so an edited EnvoyFilter is applied afresh; an
EnvoyFilter change re-pushes listeners, routes and clusters, never endpoints or secrets."""

from __future__ import annotations

from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import ProxyType
from meshpilot.model.relevance import affected_types
from meshpilot.xds.generate import generator
from meshpilot.xds.patch.selection import proxy_patches
from meshpilot.xds.protos import TypeUrl
from tests.unit.envoyfilter.helpers import REVIEWS, REVIEWS_V2, config, proxy, push_with

_FILTER = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: timeout, namespace: default, resourceVersion: "%s", generation: %d}
spec:
  workloadSelector: {labels: {app: reviews}}
  configPatches:
  - applyTo: CLUSTER
    match: {cluster: {service: ratings.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: %s}}
"""
_RATINGS = "outbound|9080||ratings.default.svc.cluster.local"


def _ratings_timeout(tmp_path: Path, text: str) -> str:
    push = push_with(tmp_path, text)
    (cluster,) = [c for c in config(push, REVIEWS).clusters if c.name == _RATINGS]
    return str(cluster.connect_timeout.ToJsonString())


def test_proxies_of_one_kind_share_the_patched_messages(tmp_path: Path) -> None:
    push = push_with(tmp_path, _FILTER % ("1", 1, "3s"))
    build = generator(TypeUrl.CLUSTER, ProxyType.SIDECAR)
    one = {c.name: c for c in build(push, proxy(push, REVIEWS), None)}
    two = {c.name: c for c in build(push, proxy(push, REVIEWS_V2), None)}
    assert one[_RATINGS].connect_timeout.ToJsonString() == "3s"
    assert one[_RATINGS] is two[_RATINGS]


def test_the_key_names_the_filters_and_an_edit_is_applied(tmp_path: Path) -> None:
    push = push_with(tmp_path, _FILTER % ("41", 7, "3s"))
    patches = proxy_patches(push, proxy(push, REVIEWS))
    assert patches is not None and patches.key == (("default", "timeout", "41", 7, 0),)
    assert _ratings_timeout(tmp_path, _FILTER % ("41", 7, "3s")) == "3s"
    assert _ratings_timeout(tmp_path, _FILTER % ("42", 8, "4s")) == "4s"


def test_an_envoy_filter_change_re_pushes_lds_rds_cds_ecds_only() -> None:
    # ECDS: EXTENSION_CONFIG patches are served as extension configs.
    key = ConfigKey(Kind.ENVOY_FILTER, "default", "timeout")
    for proxy_type in (ProxyType.SIDECAR, ProxyType.ROUTER):
        assert affected_types(proxy_type, [key], {}, {}) == {"cds", "lds", "rds", "ecds"}
