"""Which Applications own a live object: by their last comparison, and by the object's
tracking annotation."""

from __future__ import annotations

from collections.abc import Callable

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.model import Application
from meshpilot.gitops.refresh import tracking_name

__all__ = ["OwnerIndex", "apps_tracked_as"]


def apps_tracked_as(
    name: str, control_namespace: str, app_of: Callable[[ConfigKey], Application | None]
) -> list[ConfigKey]:
    """The apps whose tracking name is `name`: `<app>` for an app in the control namespace,
    else `<namespace>_<app>` (Kubernetes names have no `_`). At most two lookups, where a
    scan of every app per store event made a 1000-app sync quadratic."""
    candidates = [ConfigKey(Kind.APPLICATION, control_namespace, name)]
    namespace, sep, app = name.partition("_")
    if sep:
        candidates.append(ConfigKey(Kind.APPLICATION, namespace, app))
    found = []
    for key in candidates:
        model = app_of(key)
        if model is not None and tracking_name(model, control_namespace) == name:
            found.append(key)
    return found


class OwnerIndex:
    """Resource -> the apps whose last comparison owned it."""

    def __init__(self) -> None:
        self._owners: dict[ConfigKey, set[ConfigKey]] = {}

    def of(self, resource: ConfigKey) -> set[ConfigKey]:
        return set(self._owners.get(resource, ()))

    def update(self, app: ConfigKey, old: frozenset[ConfigKey], new: frozenset[ConfigKey]) -> None:
        for resource in old - new:
            owners = self._owners.get(resource)
            if owners is not None:
                owners.discard(app)
                if not owners:
                    del self._owners[resource]
        for resource in new:
            self._owners.setdefault(resource, set()).add(app)
