"""Shared helpers of the authz tests: load policies from YAML, render protos as dicts."""

from __future__ import annotations

from typing import Any

import yaml
from google.protobuf import json_format, message

from meshpilot.config.istio.authorization_policy import Rule
from meshpilot.config.loader import LoadResult, load_text
from meshpilot.model.push_context import PushContext, build_push_context

__all__ = ["as_dict", "load", "push_of", "rule"]


def as_dict(msg: message.Message) -> dict[str, Any]:
    found: dict[str, Any] = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    return found


def rule(text: str) -> Rule:
    """One AuthorizationPolicy rule from YAML (camelCase, `from` as in the API)."""
    return Rule.model_validate(yaml.safe_load(text))


def load(text: str, file: str = "policies.yaml") -> LoadResult:
    return load_text(text, file)


def push_of(text: str) -> PushContext:
    loaded = load(text)
    assert not loaded.errors, [str(d) for d in loaded.errors]
    return build_push_context(loaded.objects, loaded.mesh)
