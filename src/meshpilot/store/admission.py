"""What a live store admits: objects the loader validated, of kinds it has models for.

The loader only warns about unknown kinds and skips them (translation goes on without
them); a store write must refuse them instead, or `apply` would report success for an
object that was never stored.
"""

from __future__ import annotations

from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.loader import LoadResult
from meshpilot.store.writes import InvalidObjectsError

__all__ = ["refusals", "refuse_unstorable"]


def refusals(loaded: LoadResult) -> list[Diagnostic]:
    """Every reason to refuse `loaded` as a whole, as Diagnostics (empty: it can be stored)."""
    out = [d for d in loaded.diagnostics if d.severity is Severity.ERROR]
    for diag in loaded.diagnostics:
        if diag.severity is Severity.WARNING and diag.field == "kind":
            out.append(
                Diagnostic(
                    file=diag.file,
                    line=diag.line,
                    kind=diag.kind,
                    namespace=diag.namespace,
                    name=diag.name,
                    field="kind",
                    message=f"no matches for kind {diag.kind!r}: the store cannot hold it",
                )
            )
    if loaded.mesh_origin is not None and not _from_config_map(loaded):
        out.append(
            Diagnostic(
                file=loaded.mesh_origin.file,
                line=loaded.mesh_origin.line,
                kind="MeshConfig",
                message="a bare mesh config is not stored; put it in the `istio` ConfigMap "
                "(data.mesh) in istio-system",
            )
        )
    return sorted(set(out), key=Diagnostic.sort_key)


def refuse_unstorable(loaded: LoadResult) -> None:
    """Raise InvalidObjectsError unless every document of `loaded` can be stored."""
    problems = refusals(loaded)
    if problems:
        raise InvalidObjectsError(problems)


def _from_config_map(loaded: LoadResult) -> bool:
    origin = loaded.mesh_origin
    return any(
        str(o.key.kind) == "ConfigMap" and o.origin.file == origin.file
        for o in loaded.objects
        if origin is not None
    )
