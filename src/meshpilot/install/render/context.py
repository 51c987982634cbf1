"""Names, labels and images of one installation; every per-revision suffix is made here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshpilot.install.load import ResolvedOperator
from meshpilot.install.spec import IstioOperator
from meshpilot.install.values import GlobalValues, OperatorValues

__all__ = ["Context", "K8sObject"]

K8sObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Context:
    resolved: ResolvedOperator

    @property
    def operator(self) -> IstioOperator:
        return self.resolved.operator

    @property
    def values(self) -> OperatorValues:
        return self.operator.spec.values

    @property
    def global_values(self) -> GlobalValues:
        return self.values.global_ or GlobalValues()

    @property
    def revision(self) -> str:
        return self.operator.revision

    @property
    def revision_label(self) -> str:
        """The `istio.io/rev` value: the revision, or `default` for the default one."""
        return self.revision or "default"

    @property
    def namespace(self) -> str:
        """The control plane's namespace: the pilot component's, else the spec's."""
        spec = self.operator.spec
        return spec.components.pilot.namespace or spec.namespace

    def suffixed(self, name: str) -> str:
        """`name-<rev>`, or `name` for the default revision (Istio's per-revision names)."""
        return f"{name}-{self.revision}" if self.revision else name

    @property
    def istiod(self) -> str:
        return self.suffixed("istiod")

    @property
    def hub(self) -> str:
        return self.operator.spec.hub or self.global_values.hub or "docker.io/istio"

    @property
    def tag(self) -> str:
        return str(self.operator.spec.tag or self.global_values.tag or "latest")

    def image(self, name: str, hub: str = "", tag: str | int = "") -> str:
        """Istio's rule: a name with a '/' is a whole image, else hub/name:tag."""
        if "/" in name:
            return name
        return f"{hub or self.hub}/{name}:{tag or self.tag}"

    def labels(self, component: str, **extra: str) -> dict[str, str]:
        """The labels every installed object carries (istioctl's operator labels)."""
        name = self.operator.metadata.name or "unnamed"
        return {
            **extra,
            "install.operator.istio.io/owning-resource": name,
            "istio.io/rev": self.revision_label,
            "operator.istio.io/component": component,
        }

    def meta(self, name: str, component: str, namespaced: bool = True, **labels: str) -> K8sObject:
        out: K8sObject = {"name": name, "labels": self.labels(component, **labels)}
        if namespaced:
            out["namespace"] = self.namespace
        return out
