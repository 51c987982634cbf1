"""What a comparison of one Application depended on, to skip it when nothing changed (the
idle resync of an unchanged app), checked without rendering.

A comparison is a function of: the stored Application (spec, annotations, operation),
the resolved commit of every source (rendering is deterministic for a commit and the
app's spec), the live objects it pairs with the targets, the AppProjects, and the mesh
findings about those live objects. The store replaces an object it reads again, so
identity answers "unchanged?" without looking inside; references are held, so an
identity cannot be reused by a new object. The fingerprint is taken before the
comparison reads the store: a change during the comparison shows up next time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.objects import ConfigObject
from meshpilot.gitops.diff.keys import ResourceKey, key_of
from meshpilot.gitops.refresh_state import AppState

__all__ = ["Fingerprint", "fingerprint", "wanted_keys"]


@dataclass(frozen=True, slots=True, eq=False)
class Fingerprint:
    app: object  # by identity, as the objects below
    commits: tuple[str, ...]
    live: Mapping[ConfigKey, object]
    projects: tuple[object, ...]
    findings: frozenset[tuple[ConfigKey, tuple[Diagnostic, ...]]]  # by value

    def same(self, other: Fingerprint | None) -> bool:
        return (
            other is not None
            and self.app is other.app
            and self.commits == other.commits
            and self.live.keys() == other.live.keys()
            and all(other.live[k] is o for k, o in self.live.items())
            and len(self.projects) == len(other.projects)
            and all(a is b for a, b in zip(self.projects, other.projects, strict=True))
            and self.findings == other.findings
        )


def wanted_keys(
    state: AppState, to_config: Callable[[ResourceKey], ConfigKey | None]
) -> frozenset[ConfigKey]:
    """Store keys of the rendered targets (`to_config` maps a ResourceKey, or None)."""
    namespace = state.app.spec.destination.namespace
    keys = (to_config(key_of(m.data, namespace)) for m in state.targets)
    return frozenset(k for k in keys if k is not None)


def fingerprint(
    app: object,
    commits: Sequence[str],
    live_keys: Iterable[ConfigKey],
    objects: Mapping[ConfigKey, ConfigObject[Any]],
    projects: Sequence[object],
    findings: Mapping[ConfigKey, tuple[Diagnostic, ...]],
) -> Fingerprint:
    live = {k: objects.get(k) for k in live_keys}
    found = frozenset((k, d) for k in live if (d := findings.get(k)))
    return Fingerprint(app, tuple(commits), live, tuple(projects), found)
