"""ExternalName Services as aliases (Istio ENABLE_EXTERNAL_NAME_ALIAS, on since 1.21).

An alias has no cluster and no virtual host of its own: its hostname (and the short forms a
client may use) become extra domains on the virtual host of the service it names, when that
service is known. Chains (alias -> alias -> service) resolve to the last hop; a loop resolves
to nothing. Aliases of an unknown target are left out, so their traffic meets the catch-all
(PassthroughCluster or 502) as in Istio. Like Istio's resolveServiceAliases, the target is
matched by hostname alone, and aliases are ordered by (namespace, hostname).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from meshpilot.model.push_context import PushContext
from meshpilot.model.sidecar_scope import EgressHost
from meshpilot.registry.model import Service

__all__ = ["aliases_by_target", "visible_aliases"]

_MEMO = "rds.aliases-by-target"


def _resolve(services: Sequence[Service]) -> dict[str, tuple[Service, ...]]:
    raw = {s.hostname: s.alias_for for s in services if s.is_alias}
    out: dict[str, list[Service]] = {}
    for alias in (s for s in services if s.is_alias):
        target = alias.alias_for
        seen = {alias.hostname, target}
        while target in raw:
            target = raw[target]
            if target in seen:
                break  # a loop: no concrete service
            seen.add(target)
        else:
            out.setdefault(target, []).append(alias)
    return {t: tuple(sorted(v, key=lambda s: (s.namespace, s.hostname))) for t, v in out.items()}


def aliases_by_target(push: PushContext) -> Mapping[str, tuple[Service, ...]]:
    """Every alias in the registry by the concrete hostname it resolves to; once per push."""
    found = push.memo.get(_MEMO)
    if found is None:
        found = _resolve(push.registry.services)
        push.memo[_MEMO] = found
    assert isinstance(found, dict)
    return found


def visible_aliases(
    push: PushContext, svc: Service, imported: Sequence[EgressHost] | None
) -> tuple[str, ...]:
    """The alias hostnames of `svc` a proxy importing `imported` hosts sees (Istio's
    matchingAliasService); None imports everything."""
    aliases = aliases_by_target(push).get(svc.hostname, ())
    return tuple(
        a.hostname for a in aliases if imported is None or any(h.matches(a) for h in imported)
    )
