"""The should-inject decision, branch by branch, as Istio's injector and webhook decide."""

from __future__ import annotations

import pytest

from meshpilot.inject.policy import (
    InjectionPolicy,
    PodFacts,
    injection_override,
    injection_required,
    should_inject,
    webhook_revision,
)
from meshpilot.inject.selector import LabelSelector

ON, OFF = InjectionPolicy.ENABLED, InjectionPolicy.DISABLED


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        ({}, {}, None),
        ({"sidecar.istio.io/inject": "true"}, {}, True),
        ({}, {"sidecar.istio.io/inject": "yes"}, True),
        ({}, {"sidecar.istio.io/inject": "On"}, True),
        ({}, {"sidecar.istio.io/inject": "y"}, True),
        ({}, {"sidecar.istio.io/inject": "false"}, False),
        ({}, {"sidecar.istio.io/inject": "no"}, False),
        ({}, {"sidecar.istio.io/inject": "nonsense"}, False),
        ({}, {"sidecar.istio.io/inject": ""}, None),
        # the label wins over the annotation
        ({"sidecar.istio.io/inject": "true"}, {"sidecar.istio.io/inject": "false"}, True),
        ({"sidecar.istio.io/inject": "false"}, {"sidecar.istio.io/inject": "true"}, False),
    ],
)
def test_pod_override(
    labels: dict[str, str], annotations: dict[str, str], expected: bool | None
) -> None:
    assert injection_override(labels, annotations) is expected


def _pod(ns: str = "app", labels: dict[str, str] | None = None, **kw: object) -> PodFacts:
    return PodFacts(namespace=ns, labels=labels or {}, **kw)  # type: ignore[arg-type]


def test_host_network_and_system_namespaces_are_never_injected() -> None:
    forced = {"sidecar.istio.io/inject": "true"}
    assert not injection_required(_pod(labels=forced, host_network=True)).inject
    for ns in ("kube-system", "kube-public", "kube-node-lease", "local-path-storage"):
        decision = injection_required(_pod(ns, forced))
        assert not decision.inject and ns in decision.reason


def test_already_injected_pod_is_skipped() -> None:
    pod = PodFacts("app", annotations={"sidecar.istio.io/status": '{"containers":["istio-proxy"]}'})
    decision = injection_required(pod)
    assert not decision.inject and "already injected" in decision.reason


def test_policy_and_selectors() -> None:
    never = [LabelSelector.model_validate({"matchLabels": {"openshift.io/build.name": "x"}})]
    always = [
        LabelSelector.model_validate(
            {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}
        )
    ]
    plain, built, team = (
        _pod(),
        _pod(labels={"openshift.io/build.name": "x"}),
        _pod(labels={"team": "a"}),
    )
    assert injection_required(plain, ON).inject
    assert not injection_required(plain, OFF).inject
    assert not injection_required(built, ON, never, always).inject  # never beats policy
    assert injection_required(team, OFF, never, always).inject  # always beats policy
    both = _pod(labels={"openshift.io/build.name": "x", "team": "a"})
    assert not injection_required(both, ON, never, always).inject  # never checked first
    # the pod's own label beats the selectors
    forced = _pod(labels={"openshift.io/build.name": "x", "sidecar.istio.io/inject": "true"})
    assert injection_required(forced, OFF, never, always).inject
    # empty selectors are skipped (they would match every pod)
    assert injection_required(plain, ON, [LabelSelector()]).inject


@pytest.mark.parametrize(
    ("ns_labels", "pod_labels", "expected"),
    [
        ({}, {}, None),
        ({"istio-injection": "enabled"}, {}, "default"),
        ({"istio-injection": "disabled"}, {}, None),
        ({"istio-injection": "disabled"}, {"istio.io/rev": "canary"}, None),
        ({"istio-injection": "enabled", "istio.io/rev": "canary"}, {}, "default"),
        ({"istio.io/rev": "canary"}, {}, "canary"),
        ({"istio.io/rev": "canary"}, {"istio.io/rev": "stable"}, "canary"),
        ({}, {"istio.io/rev": "stable"}, "stable"),
        ({}, {"sidecar.istio.io/inject": "true"}, "default"),
        ({"istio-injection": "enabled"}, {"sidecar.istio.io/inject": "false"}, None),
        ({"istio.io/rev": "canary"}, {"sidecar.istio.io/inject": "false"}, None),
    ],
)
def test_webhook_selection(
    ns_labels: dict[str, str], pod_labels: dict[str, str], expected: str | None
) -> None:
    assert webhook_revision(ns_labels, pod_labels)[0] == expected


def test_conflicting_labels_are_reported() -> None:
    _, warnings = webhook_revision({"istio-injection": "enabled", "istio.io/rev": "canary"}, {})
    assert warnings and "istio-injection wins" in warnings[0]
    _, warnings = webhook_revision({"istio.io/rev": "canary"}, {"istio.io/rev": "stable"})
    assert warnings and "namespace label istio.io/rev=canary wins" in warnings[0]


def test_should_inject_needs_a_serving_revision() -> None:
    pod = _pod()
    assert should_inject(pod, {"istio-injection": "enabled"}).inject
    assert not should_inject(pod, {"istio.io/rev": "canary"}).inject
    assert should_inject(pod, {"istio.io/rev": "canary"}, frozenset({"canary"})).inject
    decision = should_inject(pod, {})
    assert not decision.inject and "no injection label" in decision.reason
    # selected, but the injector's policy still applies
    assert not should_inject(pod, {"istio-injection": "enabled"}, policy=OFF).inject
