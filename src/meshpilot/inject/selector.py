"""Kubernetes label selectors (matchLabels + matchExpressions), as the injector's
neverInjectSelector / alwaysInjectSelector use them (metav1.LabelSelectorAsSelector)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from meshpilot.config.base import ApiModel

__all__ = ["LabelSelector", "SelectorRequirement"]


class SelectorRequirement(ApiModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "In":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


class LabelSelector(ApiModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[SelectorRequirement] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every requirement holds (an empty selector matches everything; the
        injector skips empty selectors, as Istio does)."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            req.matches(labels) for req in self.match_expressions
        )
