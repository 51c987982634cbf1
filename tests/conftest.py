"""Shared test helpers: building a proxy's configuration from YAML text or files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from meshpilot.config.loader import LoadResult, load_paths, load_text
from meshpilot.model.proxy import Proxy, ProxyType, as_verified, proxy_from_pod
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.output import ProxyConfig

REPO = Path(__file__).resolve().parent.parent


def push_from_text(text: str) -> tuple[LoadResult, PushContext]:
    loaded = load_text(text, "test.yaml")
    return loaded, build_push_context(loaded.objects, loaded.mesh)


def push_from_paths(paths: Sequence[str | Path]) -> tuple[LoadResult, PushContext]:
    loaded = load_paths(paths)
    return loaded, build_push_context(loaded.objects, loaded.mesh)


def proxy_for(push: PushContext, ref: str, proxy_type: ProxyType = ProxyType.SIDECAR) -> Proxy:
    name, _, namespace = ref.partition(".")
    pod = push.pod(namespace or "default", name)
    if pod is None:
        raise AssertionError(f"no pod {ref} in the test input")
    # As connected over the TLS port with its own identity (SDS serves only such proxies).
    return as_verified(proxy_from_pod(pod, proxy_type))


def config_for(
    push: PushContext, ref: str, proxy_type: ProxyType = ProxyType.SIDECAR
) -> ProxyConfig:
    return generate_proxy_config(push, proxy_for(push, ref, proxy_type))


@pytest.fixture
def repo() -> Path:
    return REPO
