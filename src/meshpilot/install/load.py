"""File(s) + profile + --set + --revision → one validated IstioOperator, as istioctl builds it.

Order (istioctl's): the profile named by `--set profile=`, else by the files' `spec.profile`,
else `default`; the files' specs merged over it in the order given; then each `--set`; then
`--revision`. Each stage is checked before the next so that an error names its source.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from meshpilot.config.yaml_load import YAMLInputError, load_yaml_all
from meshpilot.install.merge import merge_spec
from meshpilot.install.profiles import profile_spec
from meshpilot.install.set_path import SetFlag, apply_sets, parse_set
from meshpilot.install.spec import (
    API_VERSION,
    IstioOperator,
    IstioOperatorError,
    check_revision,
    parse_operator,
)

__all__ = ["OperatorFile", "ResolvedOperator", "build_operator", "read_operator_files", "resolve"]


@dataclass(frozen=True, slots=True)
class OperatorFile:
    origin: str
    metadata: dict[str, Any]
    spec: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ResolvedOperator:
    """The typed IstioOperator and the merged tree it came from: the tree is what a user
    wrote (plus the profile), the text that `profile dump` prints and ConfigMaps carry."""

    operator: IstioOperator
    spec_tree: dict[str, Any]


def _operator_document(doc: Any, origin: str) -> OperatorFile:
    if not isinstance(doc, dict):
        raise IstioOperatorError(f"{origin}: expected an IstioOperator object")
    kind, version = doc.get("kind"), doc.get("apiVersion")
    if kind != "IstioOperator" or version != API_VERSION:
        raise IstioOperatorError(
            f"{origin}: expected kind IstioOperator, apiVersion {API_VERSION}; "
            f"got kind {kind!r}, apiVersion {version!r}"
        )
    spec = doc.get("spec") or {}
    metadata = doc.get("metadata") or {}
    if not isinstance(spec, dict) or not isinstance(metadata, dict):
        raise IstioOperatorError(f"{origin}: spec and metadata must be mappings")
    extra = sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec", "status"})
    if extra:
        raise IstioOperatorError(f"{origin}: {extra[0]}: unknown field")
    return OperatorFile(origin, metadata, spec)


def read_operator_files(
    paths: list[str], texts: dict[str, str] | None = None
) -> list[OperatorFile]:
    """The IstioOperators of files (one or more per file); `texts` gives text for a path."""
    out: list[OperatorFile] = []
    for path in paths:
        try:
            text = (texts or {}).get(path)
            text = Path(path).read_text() if text is None else text
        except OSError as exc:
            raise IstioOperatorError(f"cannot read {path}: {exc.strerror}") from exc
        try:
            docs = [d for d in load_yaml_all(text, path) if d is not None]
        except YAMLInputError as exc:
            raise IstioOperatorError(str(exc)) from exc
        out.extend(_operator_document(doc, path) for doc in docs)
    return out


def _profile_name(files: list[OperatorFile], flags: list[SetFlag]) -> str:
    name: Any = "default"
    for file in files:
        name = file.spec.get("profile", name)
    for flag in flags:
        if flag.path == ("profile",):
            name = flag.value
    if not isinstance(name, str):
        raise IstioOperatorError(f"spec.profile: must be a profile name, got {name!r}")
    return name


def _apply_one(tree: dict[str, Any], metadata: dict[str, Any], flag: SetFlag) -> dict[str, Any]:
    """`tree` with `flag` written; a number or boolean where a field wants text is retried
    as the text written (istioctl reads `--set tag=1.15` as the string "1.15")."""
    before = copy.deepcopy(tree)
    tree = apply_sets(tree, [flag])
    try:
        parse_operator({"metadata": metadata, "spec": tree}, f"--set {flag.text}")
    except IstioOperatorError:
        if isinstance(flag.value, str):
            raise
        as_text = apply_sets(before, [replace(flag, value=flag.raw)])
        parse_operator({"metadata": metadata, "spec": as_text}, f"--set {flag.text}")
        return as_text
    return tree


def build_operator(
    files: list[OperatorFile], sets: Sequence[str] = (), revision: str | None = None
) -> IstioOperator:
    """The IstioOperator that `istioctl manifest generate -f ... --set ...` would install."""
    return resolve(files, sets, revision).operator


def resolve(
    files: list[OperatorFile], sets: Sequence[str] = (), revision: str | None = None
) -> ResolvedOperator:
    """The IstioOperator of files, profile, --set and --revision, with its merged tree."""
    flags = [parse_set(text) for text in sets]
    tree = profile_spec(_profile_name(files, flags))
    metadata: dict[str, Any] = {}
    for file in files:
        tree = merge_spec(tree, file.spec)
        metadata = metadata or file.metadata
        parse_operator({"metadata": metadata, "spec": tree}, file.origin)
    for flag in flags:
        tree = _apply_one(tree, metadata, flag)
    if revision is not None:
        try:
            check_revision(revision)
        except ValueError as exc:
            raise IstioOperatorError(f"--revision: {exc}") from exc
        tree["revision"] = revision
    revision_value = tree.get("revision") or (tree.get("values") or {}).get("revision")
    if revision_value:
        tree["revision"] = revision_value
        tree.setdefault("values", {})["revision"] = revision_value
    return ResolvedOperator(
        parse_operator({"metadata": metadata, "spec": tree}, "IstioOperator"), tree
    )
