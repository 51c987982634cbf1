"""Whether a pod gets a sidecar: the one decision, as Istio's injector makes it.

Two stages, as in a cluster. First the MutatingWebhookConfiguration selectors pick which
revision's injector (if any) is called (`webhook_revision`, spec lifecycle §5.2): a
namespace `istio-injection` label beats a namespace `istio.io/rev` label, which beats a pod
`istio.io/rev` label; a pod label `sidecar.istio.io/inject=false` always opts out. Then the
injector itself decides (`injection_required`, Istio's `injectRequired`): hostNetwork pods,
ignored system namespaces and already-injected pods are skipped; the pod's
`sidecar.istio.io/inject` (label over annotation) forces; otherwise neverInjectSelector,
alwaysInjectSelector and the policy (enabled/disabled) decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from meshpilot.inject.selector import LabelSelector

__all__ = [
    "IGNORED_NAMESPACES",
    "INJECT_KEY",
    "STATUS_ANNOTATION",
    "Decision",
    "InjectionPolicy",
    "PodFacts",
    "injection_override",
    "injection_required",
    "should_inject",
    "webhook_revision",
]

INJECT_KEY = "sidecar.istio.io/inject"
STATUS_ANNOTATION = "sidecar.istio.io/status"
REV_LABEL = "istio.io/rev"
LEGACY_LABEL = "istio-injection"
# Istio's IgnoredNamespaces: never injected, whatever the labels say.
IGNORED_NAMESPACES = frozenset(
    {"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}
)
_YES = frozenset({"y", "yes", "true", "on"})


class InjectionPolicy(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the decision reads of a pod (metadata of a Pod or of a workload's template)."""

    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    host_network: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    inject: bool
    reason: str
    warnings: tuple[str, ...] = ()


def injection_override(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool | None:
    """The pod's own `sidecar.istio.io/inject` (the label wins over the annotation):
    y/yes/true/on force injection, any other non-empty value forbids it, absent or empty
    leaves it to the selectors and the policy."""
    value = labels.get(INJECT_KEY, annotations.get(INJECT_KEY, ""))
    if not value:
        return None
    return value.lower() in _YES


def injection_required(
    pod: PodFacts,
    policy: InjectionPolicy = InjectionPolicy.ENABLED,
    never: Sequence[LabelSelector] = (),
    always: Sequence[LabelSelector] = (),
) -> Decision:
    """Istio's injectRequired, plus its skip of pods injected already."""
    if pod.host_network:
        return Decision(False, "the pod uses hostNetwork")
    if pod.namespace in IGNORED_NAMESPACES:
        return Decision(False, f"namespace {pod.namespace!r} is never injected")
    if pod.annotations.get(STATUS_ANNOTATION):
        return Decision(False, f"already injected (annotation {STATUS_ANNOTATION})")
    forced = injection_override(pod.labels, pod.annotations)
    if forced is not None:
        return Decision(forced, f"{INJECT_KEY}={'true' if forced else 'false'} on the pod")
    for selector in never:
        if not selector.empty and selector.matches(pod.labels):
            return Decision(False, "the pod matches a neverInjectSelector")
    for selector in always:
        if not selector.empty and selector.matches(pod.labels):
            return Decision(True, "the pod matches an alwaysInjectSelector")
    if policy is InjectionPolicy.ENABLED:
        return Decision(True, "injection policy is enabled")
    return Decision(False, "injection policy is disabled and nothing on the pod asks for it")


def webhook_revision(
    namespace_labels: Mapping[str, str], pod_labels: Mapping[str, str]
) -> tuple[str | None, tuple[str, ...]]:
    """The revision (or tag) whose injector webhook the API server calls for this pod,
    from the MutatingWebhookConfiguration selectors; None when no webhook matches.
    Also returns warnings about conflicting labels (istioctl analyze reports those)."""
    warnings: tuple[str, ...] = ()
    if pod_labels.get(INJECT_KEY) == "false":
        return None, warnings
    if LEGACY_LABEL in namespace_labels:
        if REV_LABEL in namespace_labels:
            warnings = (
                f"the namespace has both {LEGACY_LABEL} and {REV_LABEL} labels; "
                f"{LEGACY_LABEL} wins",
            )
        enabled = namespace_labels[LEGACY_LABEL] == "enabled"
        return ("default" if enabled else None), warnings
    if REV_LABEL in namespace_labels:
        if REV_LABEL in pod_labels and pod_labels[REV_LABEL] != namespace_labels[REV_LABEL]:
            warnings = (
                f"the pod's {REV_LABEL}={pod_labels[REV_LABEL]} is ignored: the namespace "
                f"label {REV_LABEL}={namespace_labels[REV_LABEL]} wins",
            )
        return namespace_labels[REV_LABEL], warnings
    if REV_LABEL in pod_labels:
        return pod_labels[REV_LABEL], warnings
    if pod_labels.get(INJECT_KEY) == "true":
        return "default", warnings
    return None, warnings


def should_inject(
    pod: PodFacts,
    namespace_labels: Mapping[str, str],
    revisions: frozenset[str] = frozenset({"default"}),
    policy: InjectionPolicy = InjectionPolicy.ENABLED,
    never: Sequence[LabelSelector] = (),
    always: Sequence[LabelSelector] = (),
) -> Decision:
    """The whole decision for a pod created in a namespace: the webhook of one of
    `revisions` (a revision and the tags pointing at it) is called, and it injects."""
    chosen, warnings = webhook_revision(namespace_labels, pod.labels)
    if chosen is None:
        return Decision(False, "no injection label selects an injector", warnings)
    if chosen not in revisions:
        return Decision(False, f"revision {chosen!r} is not served here", warnings)
    decision = injection_required(pod, policy, never, always)
    return Decision(decision.inject, decision.reason, warnings)
