"""The manifest side of a preview: render an app's sources at one commit, and diff two
renders per resource with gitops/diff's normalization and Secret masking."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from meshpilot.gitops.diff.keys import ResourceKey, key_of
from meshpilot.gitops.diff.mask import mask_secrets
from meshpilot.gitops.diff.normalize import ManifestNormalizer
from meshpilot.gitops.diff.text import to_yaml
from meshpilot.gitops.preview.model import Change, ResourceChange
from meshpilot.gitops.render.manifest import Manifest
from meshpilot.gitops.render.request import RenderRequest
from meshpilot.gitops.render.service import Renderer

__all__ = ["Rendered", "diff_renders", "render_all"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """All manifests of one app at one commit, sources merged in order (a later source's
    copy of a resource wins, as Argo CD merges multiple sources)."""

    manifests: tuple[Manifest, ...]

    def by_key(self, namespace: str) -> dict[ResourceKey, Manifest]:
        return {key_of(m.data, namespace): m for m in self.manifests}


def render_all(renderer: Renderer, requests: Sequence[RenderRequest]) -> Rendered:
    """Render every request (the Renderer caches by commit, path and parameters)."""
    out: list[Manifest] = []
    for request in requests:
        out.extend(renderer.render(request).manifests)
    return Rendered(tuple(out))


def diff_renders(base: Rendered, head: Rendered, namespace: str) -> tuple[ResourceChange, ...]:
    """Per resource: added, removed or changed between the two renders, with a masked
    unified diff (`base/<key>` → `head/<key>`)."""
    normalizer = ManifestNormalizer(default_namespace=namespace, drop_tracking=True)
    before, after = base.by_key(namespace), head.by_key(namespace)
    out = []
    for key in sorted(before.keys() | after.keys()):
        old = normalizer(before[key].data) if key in before else None
        new = normalizer(after[key].data) if key in after else None
        if old == new:
            continue
        shown_new, shown_old = mask_secrets(new, old)
        label = str(key)
        lines = difflib.unified_diff(
            to_yaml(shown_old).splitlines(keepends=True),
            to_yaml(shown_new).splitlines(keepends=True),
            fromfile=f"base/{label}",
            tofile=f"head/{label}",
        )
        text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        change = Change.ADDED if old is None else Change.REMOVED if new is None else Change.CHANGED
        out.append(ResourceChange(label, change, text))
    return tuple(out)
