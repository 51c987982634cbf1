"""Health of one live object, one YAML fixture per kind and state (fixtures/<kind>-<state>.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from meshpilot.gitops.diff import ResourceKey
from meshpilot.gitops.health import HealthStatusCode, resource_health
from meshpilot.gitops.health.app import worst

FIXTURES = Path(__file__).parent / "fixtures"

H, P, D, S, U = (
    HealthStatusCode.HEALTHY,
    HealthStatusCode.PROGRESSING,
    HealthStatusCode.DEGRADED,
    HealthStatusCode.SUSPENDED,
    HealthStatusCode.UNKNOWN,
)

EXPECTED: dict[str, tuple[HealthStatusCode, str]] = {
    "pod-running": (H, ""),
    "pod-crashloop": (D, "back-off 5m0s restarting failed container=app"),
    "pod-pending": (P, "0/3 nodes are available"),
    "pod-failed": (D, "container 'migrate' failed with exit code 3"),
    "pod-hook-running": (P, ""),
    "pod-universal": (H, "no phase reported"),
    "deployment-healthy": (H, ""),
    "deployment-progressing": (
        P,
        "Waiting for rollout to finish: 1 out of 3 new replicas have been updated...",
    ),
    "deployment-paused": (S, "Deployment is paused"),
    "deployment-degraded": (D, "Deployment 'reviews' exceeded its progress deadline"),
    "statefulset-healthy": (H, "statefulset rolling update complete 2 pods at revision db-1..."),
    "statefulset-progressing": (P, "Waiting for 2 pods to be ready..."),
    "daemonset-progressing": (
        P,
        "Waiting for daemon set 'agent' rollout to finish: 1 of 3 updated pods are available...",
    ),
    "service-healthy": (H, ""),
    "service-progressing": (P, "Waiting for the load balancer to get an address"),
    "namespace-healthy": (H, ""),
    "namespace-progressing": (P, "Namespace is terminating"),
    "endpoints-healthy": (H, ""),
    "endpoints-progressing": (P, "Waiting for endpoints: 1 addresses not ready"),
    "secret-healthy": (H, ""),
    "configmap-deleting": (P, "Pending deletion"),
}


def test_every_fixture_has_an_expectation_and_back() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_health_of_fixture(case: str) -> None:
    obj = yaml.safe_load((FIXTURES / f"{case}.yaml").read_text())
    health = resource_health(obj)
    assert health is not None
    assert (health.status, health.message) == EXPECTED[case]


def test_missing_and_unchecked_kinds() -> None:
    missing = resource_health(None)
    assert missing is not None and missing.status is HealthStatusCode.MISSING
    job = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "x", "namespace": "a"}}
    assert resource_health(job) is None


def test_malformed_status_is_unknown_not_a_crash() -> None:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": "many"},
    }
    health = resource_health(obj)
    assert health is not None and health.status is U and "cannot assess health" in health.message


def _key(name: str) -> ResourceKey:
    return ResourceKey("", "Pod", "shop", name)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], H),
        ([H, S], S),
        ([H, S, P], P),
        ([P, HealthStatusCode.MISSING], HealthStatusCode.MISSING),
        ([HealthStatusCode.MISSING, D], D),
        ([D, U, H], U),
    ],
)
def test_app_health_is_the_worst_in_argo_cds_order(
    statuses: list[HealthStatusCode], expected: HealthStatusCode
) -> None:
    from meshpilot.gitops.health import Health

    healths = {_key(f"p{i}"): Health(s, "why") for i, s in enumerate(statuses)}
    healths[_key("unchecked")] = None
    status, message = worst(healths)
    assert status is expected
    assert message == ("" if expected is H else f"Pod/shop/p{statuses.index(expected)}: why")
