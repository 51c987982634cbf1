"""EnvoyFilter patches that would be skipped when served: `analyze` generates the
configuration of each kind of workload (namespace and labels) and warns, at the patch, about
every patch that raised or would have made Envoy reject the patched resource (xds/patch/):
the first reason and how many resources it concerns. A warning: the rest is served."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, cast

from meshpilot.analysis.findings import finding
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import ProxyType, as_verified, proxy_from_pod
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate import generator
from meshpilot.xds.patch import PATCHED_TYPES, patch_problems
from meshpilot.xds.patch.reports import quiet
from meshpilot.xds.patch.selection import proxy_patches

__all__ = ["BUDGET", "check_envoy_filters"]

log = logging.getLogger(__name__)
# Seconds spent generating workloads' configuration; the kinds left unchecked after it are
# logged (a mesh-wide filter on a large mesh would otherwise make analyze slow).
BUDGET = 20.0


def check_envoy_filters(push: PushContext) -> Iterator[Diagnostic]:
    if not push.of_kind(Kind.ENVOY_FILTER):
        return
    quiet(push)
    started = time.monotonic()
    selectors = [gw.model.spec.selector for gw in push.gateways if gw.model.spec.selector]
    seen: set[tuple[object, ...]] = set()
    for pod in cast(Sequence[ConfigObject[Pod]], push.of_kind(Kind.POD)):
        router = any(all(pod.labels.get(k) == v for k, v in s.items()) for s in selectors)
        proxy_type = ProxyType.ROUTER if router else ProxyType.SIDECAR
        proxy = as_verified(proxy_from_pod(pod, proxy_type, push.domain_suffix))
        patches = proxy_patches(push, proxy)
        if patches is None:
            continue
        # One workload of a kind: same patches, same outbound class, same labels (inbound).
        kind_of = (push.proxy_class(proxy), patches.key, tuple(sorted(pod.labels.items())))
        if kind_of in seen:
            continue
        seen.add(kind_of)
        if time.monotonic() - started > BUDGET:
            log.warning(
                "analyze: EnvoyFilter patches checked on %d workload kinds only (%.0f s spent)",
                len(seen) - 1,
                BUDGET,
            )
            break
        for type_url in sorted(PATCHED_TYPES):
            generator(type_url, proxy_type)(push, proxy, None)
    by_patch: dict[tuple[str, str, int], list[str]] = {}
    for problem in patch_problems(push):
        by_patch.setdefault((problem.namespace, problem.name, problem.index), []).append(
            problem.message
        )
    for (namespace, name, index), messages in sorted(by_patch.items()):
        obj = push.by_key.get(ConfigKey(Kind.ENVOY_FILTER, namespace, name))
        if obj is not None:
            more = f" (and {len(messages) - 1} more resource(s))" if messages[1:] else ""
            yield _finding(obj, index, messages[0] + more)


def _finding(obj: ConfigObject[Any], index: int, message: str) -> Diagnostic:
    return finding(
        obj,
        ("spec", "configPatches", index),
        f"patch skipped: {message}",
        code="MP0011",
    )
