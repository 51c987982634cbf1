"""The effective traffic policy of (DestinationRule, port, subset), once per push.

Clusters, their templates and the EDS locality plan each ask for it, for every subset of
every port: merging is pure, so one push computes each once, and the same policy object
comes back (the cluster templates' policy memo then hits by identity).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.config.istio.destination_rule import TrafficPolicy
from meshpilot.model.indexes.destination_rules import BoundDestinationRule
from meshpilot.model.push_context import PushContext
from meshpilot.model.traffic_policy import effective_traffic_policy

__all__ = ["push_traffic_policy"]

_MEMO = "generate.traffic_policies"


def push_traffic_policy(
    push: PushContext, rule: BoundDestinationRule | None, port: int, subset: str = ""
) -> TrafficPolicy | None:
    """`effective_traffic_policy` of the rule's model, memoised for the push. Keyed by the
    rule's id: the rules are kept alive next to the memo, so an id stays unique (and the
    entries hold no new containers for the garbage collector to walk)."""
    if rule is None:
        return None
    memo = push.memo.get(_MEMO)
    if memo is None:
        memo = push.memo[_MEMO] = _Memo({}, [])
    assert isinstance(memo, _Memo)
    key = (id(rule), port, subset)
    if key in memo.policies:
        return memo.policies[key]
    memo.rules.append(rule)
    found = memo.policies[key] = effective_traffic_policy(rule.obj.model, port, subset)
    return found


@dataclass(frozen=True, slots=True)
class _Memo:
    policies: dict[tuple[int, int, str], TrafficPolicy | None]
    rules: list[BoundDestinationRule]
