"""Chart dependencies from a chart cache that survives between renders (spec §10.7).

Remote dependencies (http(s)/oci repositories) are immutable per (name, version,
repository), so their archives are kept in the cache directory and copied into the
chart's charts/ before rendering; only missing ones are fetched (helm dependency update
through helm-python-sdk), then written back. file:// dependencies live in the same repo
and can change with any commit, so they are always packaged fresh (it is local and fast).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import helm_python

from meshpilot.gitops.render.errors import HelmRenderError

__all__ = ["ChartCache", "prepare_dependencies"]


class ChartCache:
    """Directory of dependency archives: <sha256(name|version|repository)>/<name>-<ver>.tgz."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True, mode=0o700)

    def _slot(self, dep: dict[str, str]) -> Path:
        key = "|".join((dep.get("name", ""), dep.get("version", ""), dep.get("repository", "")))
        return self.root / hashlib.sha256(key.encode()).hexdigest()[:32]

    def restore(self, dep: dict[str, str], charts_dir: Path) -> bool:
        slot = self._slot(dep)
        archives = sorted(slot.glob("*.tgz")) if slot.is_dir() else []
        if not archives:
            return False
        charts_dir.mkdir(exist_ok=True)
        for archive in archives:
            shutil.copy2(archive, charts_dir / archive.name)
        return True

    def store(self, dep: dict[str, str], charts_dir: Path) -> None:
        name = dep.get("name", "")
        archives = sorted(charts_dir.glob(f"{name}-*.tgz"))
        if not archives:
            return
        slot = self._slot(dep)
        tmp = slot.with_name(slot.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for archive in archives:
            shutil.copy2(archive, tmp / archive.name)
        shutil.rmtree(slot, ignore_errors=True)
        tmp.rename(slot)  # atomic: a concurrent reader sees the old or the new slot


def _is_local(dep: dict[str, str]) -> bool:
    return str(dep.get("repository", "")).startswith("file://") or not dep.get("repository")


def prepare_dependencies(chart_dir: Path, cache: ChartCache | None, shown: str) -> None:
    """Make charts/ complete: cache first, then fetch only what is missing."""
    try:
        deps = helm_python.dependency_list(chart_dir)
    except helm_python.HelmError as exc:
        raise HelmRenderError(f"{shown}: cannot read chart dependencies: {exc}") from None
    missing = [d for d in deps if d.get("status") != "ok"]
    if not missing:
        return
    charts_dir = chart_dir / "charts"
    remote = [d for d in missing if not _is_local(d)]
    unresolved = [d for d in remote if cache is None or not cache.restore(d, charts_dir)]
    if any(_is_local(d) for d in missing) or unresolved:
        try:
            helm_python.dependency_update(chart_dir)
        except helm_python.HelmError as exc:
            names = ", ".join(f"{d.get('name')} {d.get('version')}" for d in missing)
            raise HelmRenderError(
                f"{shown}: cannot fetch chart dependencies ({names}): {exc}"
            ) from None
        if cache is not None:
            for dep in unresolved:
                cache.store(dep, charts_dir)
