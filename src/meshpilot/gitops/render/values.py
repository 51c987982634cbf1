"""Helm values: files in order (SOPS-encrypted ones decrypted in memory), inline values,
then `--set` parameters, merged as Helm merges them (maps deep, everything else replaced)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import helm_python

from meshpilot.gitops.render.errors import HelmRenderError, RenderError, SecretDecryptError
from meshpilot.gitops.render.request import HelmParameter
from meshpilot.gitops.render.sops import (
    AgeError,
    AgeIdentity,
    SopsError,
    decrypt_document,
    is_sops_document,
    load_tree,
)

__all__ = ["apply_parameters", "load_values_file", "merge_values", "parse_inline_values"]


def merge_values(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` wins; nested maps merge, lists and scalars are replaced (helm -f semantics)."""
    out = copy.copy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_values(out[key], value)
        else:
            out[key] = value
    return out


def _as_mapping(data: Any, shown: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RenderError(f"{shown}:1: values must be a YAML mapping")
    return data


def load_values_file(path: Path, shown: str, identities: Sequence[AgeIdentity]) -> dict[str, Any]:
    """A values file; SOPS files (a `sops` block with a MAC) are decrypted in memory."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RenderError(f"{shown}: cannot read values file: {exc.strerror}") from None
    try:
        data = load_tree(text, shown)
    except SopsError as exc:
        raise RenderError(str(exc)) from None
    if is_sops_document(data):
        try:
            data = decrypt_document(text, shown, list(identities))
        except (SopsError, AgeError) as exc:
            raise SecretDecryptError(str(exc)) from None
    return _as_mapping(data, shown)


def parse_inline_values(text: str, shown: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        data = load_tree(text, shown)
    except SopsError as exc:
        raise RenderError(str(exc)) from None
    return _as_mapping(data, shown)


def _escape(value: str) -> str:
    """Argo CD escapes commas in --set values unless the value is a {a,b} list."""
    if value.startswith("{") and value.endswith("}"):
        return value
    return value.replace("\\", "\\\\").replace(",", "\\,")


def apply_parameters(values: dict[str, Any], parameters: Sequence[HelmParameter]) -> dict[str, Any]:
    out = values
    for param in parameters:
        expression = f"{param.name}={_escape(param.value)}"
        try:
            if param.force_string:
                parsed = helm_python.parse_set_string_values(expression)
            else:
                parsed = helm_python.parse_set_string(expression)
        except helm_python.HelmError:
            raise HelmRenderError(
                f"helm parameter {param.name!r}: not a valid --set expression"
            ) from None
        out = merge_values(out, parsed)
    return out
