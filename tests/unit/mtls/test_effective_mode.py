"""The effective mTLS mode of a workload per port, composed as Istio does: workload over
namespace over mesh (root namespace), UNSET inherits, the oldest policy of a level wins,
PERMISSIVE by default."""

from __future__ import annotations

import pytest

from meshpilot.config.istio.peer_authentication import MtlsMode
from meshpilot.model.indexes.authn import peer_authn
from tests.conftest import push_from_text
from tests.unit.mtls.meshes import BASE
from tests.unit.mtls.meshes import peer_authn as pa

D, P, S = MtlsMode.DISABLE, MtlsMode.PERMISSIVE, MtlsMode.STRICT
API = "{app: api}"


def _modes(policies: str, ports: tuple[int, ...] = (8080, 9000)) -> tuple[MtlsMode, ...]:
    loaded, push = push_from_text(BASE + policies)
    assert not loaded.errors, [str(d) for d in loaded.errors]
    effective = peer_authn(push).for_workload("shop", {"app": "api", "version": "v1"})
    return tuple(effective.for_port(p) for p in ports)


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        ("", (P, P)),  # mesh default
        (pa("default", "istio-system", "STRICT"), (S, S)),
        (pa("default", "istio-system", "STRICT") + pa("default", "shop", "DISABLE"), (D, D)),
        # UNSET (or no mtls at all) inherits from the level above
        (pa("default", "istio-system", "STRICT") + pa("default", "shop", "UNSET"), (S, S)),
        (pa("default", "istio-system", "STRICT") + pa("default", "shop", None), (S, S)),
        (pa("default", "istio-system", "UNSET"), (P, P)),
        # a workload policy overrides its namespace
        (pa("default", "shop", "STRICT") + pa("api", "shop", "DISABLE", API), (D, D)),
        (pa("default", "shop", "STRICT") + pa("api", "shop", "UNSET", API), (S, S)),
        # port-level exceptions; UNSET there inherits the workload's mode
        (
            pa("default", "shop", "STRICT")
            + pa("api", "shop", "PERMISSIVE", API, "{8080: {mode: DISABLE}}"),
            (D, P),
        ),
        (
            pa("default", "shop", "STRICT")
            + pa("api", "shop", None, API, "{8080: {mode: UNSET}, 9000: {mode: DISABLE}}"),
            (S, D),
        ),
        # a policy for other workloads does not apply
        (pa("other", "shop", "DISABLE", "{app: other}"), (P, P)),
        # selecting policies in the root namespace are ignored, as are other namespaces'
        (pa("sel", "istio-system", "DISABLE", API), (P, P)),
        (pa("default", "other", "STRICT"), (P, P)),
    ],
)
def test_composition(policies: str, expected: tuple[MtlsMode, ...]) -> None:
    assert _modes(policies) == expected


def test_oldest_policy_of_a_level_wins() -> None:
    older = pa("b-older", "shop", "STRICT", API, created="2024-01-01T00:00:00Z")
    newer = pa("a-newer", "shop", "DISABLE", API, created="2025-01-01T00:00:00Z")
    assert _modes(newer + older) == (S, S)
    ns_older = pa("z", "shop", "DISABLE", created="2020-01-01T00:00:00Z")
    ns_newer = pa("a", "shop", "STRICT", created="2021-01-01T00:00:00Z")
    assert _modes(ns_newer + ns_older) == (D, D)
    # same age: by name
    assert _modes(pa("b", "shop", "STRICT") + pa("a", "shop", "DISABLE")) == (D, D)


def test_service_mode_ignores_workload_policies() -> None:
    """What a client assumes about a service (Istio's BestEffortInferServiceMTLSMode)."""
    text = BASE + pa("default", "istio-system", "DISABLE") + pa("api", "shop", "STRICT", API)
    _, push = push_from_text(text)
    index = peer_authn(push)
    assert index.service_mode("shop") is D
    _, push = push_from_text(BASE + pa("default", "shop", "STRICT"))
    assert peer_authn(push).service_mode("shop") is S
    assert peer_authn(push).service_mode("elsewhere") is P


def test_the_index_is_built_once_per_push() -> None:
    _, push = push_from_text(BASE + pa("default", "shop", "STRICT"))
    assert peer_authn(push) is peer_authn(push)
