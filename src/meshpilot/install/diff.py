"""Object-by-object difference of two manifests (istioctl manifest diff).

Objects are matched by (group, kind, namespace, name); each one missing on a side is named,
and each one that differs gets a unified diff of its YAML with sorted keys.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import yaml

from meshpilot.install.manifest import object_key
from meshpilot.install.render.context import K8sObject

__all__ = ["ManifestDiff", "diff_manifests"]


@dataclass(frozen=True, slots=True)
class ManifestDiff:
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    changed: tuple[tuple[str, str], ...]  # (object, unified diff)

    @property
    def same(self) -> bool:
        return not (self.only_a or self.only_b or self.changed)

    def render(self, a: str, b: str) -> str:
        if self.same:
            return f"Manifests {a} and {b} are identical\n"
        lines = [f"Object {name} is missing in {b}" for name in self.only_a]
        lines += [f"Object {name} is missing in {a}" for name in self.only_b]
        for name, text in self.changed:
            lines.append(f"Object {name} has diffs:")
            lines.append(text.rstrip("\n"))
        return "\n".join(lines) + "\n"


def _label(key: tuple[str, str, str, str]) -> str:
    return ":".join(part for part in (key[1], key[2], key[3]) if part)


def _text(obj: K8sObject) -> list[str]:
    return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False).splitlines(keepends=True)


def diff_manifests(
    a: list[K8sObject], b: list[K8sObject], a_name: str, b_name: str
) -> ManifestDiff:
    by_a = {object_key(o): o for o in a}
    by_b = {object_key(o): o for o in b}
    changed = []
    for key in sorted(by_a.keys() & by_b.keys()):
        if by_a[key] != by_b[key]:
            text = "".join(difflib.unified_diff(_text(by_a[key]), _text(by_b[key]), a_name, b_name))
            changed.append((_label(key), text))
    return ManifestDiff(
        tuple(_label(k) for k in sorted(by_a.keys() - by_b.keys())),
        tuple(_label(k) for k in sorted(by_b.keys() - by_a.keys())),
        tuple(changed),
    )
