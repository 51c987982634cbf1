"""Directory sources: every .yaml/.yml/.json file, optionally recursive, with Argo CD's
include/exclude globs. Files are read in sorted order so output is deterministic."""

from __future__ import annotations

from pathlib import Path

from meshpilot.gitops.render.errors import ManifestParseError, RenderError
from meshpilot.gitops.render.globs import glob_match
from meshpilot.gitops.render.manifest import Manifest, parse_manifests
from meshpilot.gitops.render.request import DirectoryOptions

__all__ = ["render_directory"]

_SUFFIXES = (".yaml", ".yml", ".json")


def _candidates(root: Path, recurse: bool) -> list[Path]:
    found = root.rglob("*") if recurse else root.glob("*")
    return sorted(
        p
        for p in found
        if p.is_file()
        and p.suffix in _SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


def render_directory(root: Path, options: DirectoryOptions, label: str = "") -> list[Manifest]:
    """Manifests of `root`; file names in errors and Manifest.file are `label/relative`."""
    if not root.is_dir():
        raise RenderError(f"{label or root}: app path does not exist or is not a directory")
    out: list[Manifest] = []
    for file in _candidates(root, options.recurse):
        rel = file.relative_to(root).as_posix()
        if options.include and not glob_match(options.include, rel):
            continue
        if options.exclude and glob_match(options.exclude, rel):
            continue
        shown = f"{label}/{rel}" if label and label != "." else rel
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ManifestParseError(f"{shown}: not UTF-8 text") from None
        out.extend(parse_manifests(text, shown))
    return out
