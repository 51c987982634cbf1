"""Locality load balancing settings: `distribute` weights and `failover` regions (Istio's
agent.ValidateLocalityLbSetting and validateLocalities).

`distribute` and `failover` entries are loosely typed in the model, so every value is
type-checked here before use.
"""

from __future__ import annotations

from meshpilot.config.istio.destination_rule import LocalityLoadBalancerSetting, OutlierDetection
from meshpilot.config.validation.common import Path, Problems, quoted

__all__ = ["check_locality_lb", "check_outlier_for_failover"]

_TOPOLOGY_LABELS = frozenset(
    {
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "topology.istio.io/subzone",
    }
)


def check_locality_lb(p: Problems, path: Path, lb: LocalityLoadBalancerSetting | None) -> None:
    if lb is None:
        return
    if lb.distribute and lb.failover:
        p.error(path, "can not simultaneously specify 'distribute' and 'failover'")
        return
    if lb.failover:
        for index, label in enumerate(lb.failover_priority):
            if label in _TOPOLOGY_LABELS:
                p.error(
                    (*path, "failoverPriority", index),
                    f"can not simultaneously set 'failover' and topology label {quoted(label)} "
                    "in 'failoverPriority'",
                )
    sources: list[str] = []
    for index, entry in enumerate(lb.distribute):
        where = (*path, "distribute", index)
        source = entry.get("from")
        if not isinstance(source, str):
            p.error((*where, "from"), "distribute entries need a 'from' locality")
        else:
            sources.append(source)
        _check_weights(p, where, entry.get("to"))
    p.add((*path, "distribute"), _localities_error(sources))
    for index, failover in enumerate(lb.failover):
        _check_failover(p, (*path, "failover", index), failover)


def _check_weights(p: Problems, path: Path, weights: object) -> None:
    if not isinstance(weights, dict) or not weights:
        p.error((*path, "to"), "distribute entries need 'to': a map of locality to weight")
        return
    total = 0
    for locality, weight in weights.items():
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            p.error((*path, "to", str(locality)), "locality weight must be in range [1, 100]")
            return
        total += weight
    if total != 100:
        p.error((*path, "to"), f"total locality weight {total} != 100")
        return
    p.add((*path, "to"), _localities_error([str(k) for k in weights]))


def _check_failover(p: Problems, path: Path, failover: dict[str, str]) -> None:
    source, target = failover.get("from", ""), failover.get("to", "")
    if source == target:
        p.error(path, "locality lb failover settings must specify different regions")
    if "/" in source or "/" in target:
        p.error(path, "locality lb failover only specify region")
    if "*" in source or "*" in target:
        p.error(path, "locality lb failover region should not contain '*' wildcard")


def check_outlier_for_failover(
    p: Problems,
    path: Path,
    lb: LocalityLoadBalancerSetting | None,
    outlier: OutlierDetection | None,
) -> None:
    if lb is not None and (lb.failover or lb.failover_priority) and outlier is None:
        p.warning(path, "outlier detection policy must be provided for failover")


def _localities_error(localities: list[str]) -> str | None:
    """Localities `region[/zone[/subzone]]`, a trailing `*` at most, none covering another."""
    claimed: list[tuple[str, ...]] = []
    for locality in localities:
        stars = locality.count("*")
        if stars > 1 or (stars == 1 and not locality.endswith("*")):
            return (
                f"locality {locality} wildcard '*' number can not exceed 1 and must be in the end"
            )
        parts = tuple(locality.split("/", 2))
        if any(part == "" for part in parts):
            return f"locality {locality} must not contain empty region/zone/subzone info"
        for other in claimed:
            if _covers(other, parts) or _covers(parts, other):
                return f"locality {locality} overlap with previous specified ones"
        claimed.append(parts)
    return None


def _covers(wide: tuple[str, ...], narrow: tuple[str, ...]) -> bool:
    """Does `wide` (possibly ending in `*`) include `narrow`?"""
    for index, part in enumerate(wide):
        if part == "*":
            return True
        if index >= len(narrow) or narrow[index] != part:
            return False
    return True  # `wide` equals `narrow` or is a prefix of it
