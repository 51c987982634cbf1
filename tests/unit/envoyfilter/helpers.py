"""Bookinfo plus EnvoyFilters written by the test: the push, a proxy and its config."""

from __future__ import annotations

from pathlib import Path

from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.output import ProxyConfig
from tests.conftest import REPO, proxy_for, push_from_paths

__all__ = ["GATEWAY", "PRODUCTPAGE", "REVIEWS", "REVIEWS_V2", "config", "proxy", "push_with"]

BOOKINFO = REPO / "examples" / "bookinfo"
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"
REVIEWS = "reviews-v1-545db77b95-k7z8n.default"
REVIEWS_V2 = "reviews-v2-7bf8c9648f-q5v4h.default"
GATEWAY = "istio-ingressgateway-5d8f7b9c4-x2x7p.istio-system"


def push_with(tmp_path: Path, text: str) -> PushContext:
    path = tmp_path / "envoyfilters.yaml"
    path.write_text(text)
    loaded, push = push_from_paths([BOOKINFO, path])
    assert not loaded.errors, [str(d) for d in loaded.errors]
    return push


def config(push: PushContext, ref: str, proxy_type: ProxyType = ProxyType.SIDECAR) -> ProxyConfig:
    return generate_proxy_config(push, proxy(push, ref, proxy_type))


def proxy(push: PushContext, ref: str, proxy_type: ProxyType = ProxyType.SIDECAR) -> Proxy:
    return proxy_for(push, ref, proxy_type)
