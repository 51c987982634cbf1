"""A Kubernetes structural OpenAPI v3 schema from a pydantic model's JSON schema.

CRDs in apiextensions.k8s.io/v1 need structural schemas: every node typed, no `$ref`, no
`anyOf` of different types. Optional fields become their type, `int | str` becomes
`x-kubernetes-int-or-string`, open mappings and other unions keep unknown fields, and a
recursive model is cut after its first level (the control plane validates the rest).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from meshpilot.config.duration import parse_duration

__all__ = ["structural_schema"]

_ANY: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
_OPEN_OBJECT: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_SCALARS = {"string", "integer", "number", "boolean"}


def _convert(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(node, dict):
        return dict(_ANY)
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name in seen:
            return dict(_OPEN_OBJECT)
        return _convert(defs.get(name, {}), defs, (*seen, name))
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return _union([c for c in node[key] if c.get("type") != "null"], defs, seen)
    if "const" in node:
        return {"type": "string", "enum": [node["const"]]}
    kind = node.get("type")
    if kind == "object":
        return _object(node, defs, seen)
    if kind == "array":
        return {"type": "array", "items": _convert(node.get("items", {}), defs, seen)}
    if kind in _SCALARS:
        out: dict[str, Any] = {"type": kind}
        if "enum" in node:
            out["enum"] = list(node["enum"])
        return out
    return dict(_ANY)


def _union(choices: list[Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    converted = [_convert(c, defs, seen) for c in choices]
    if len(converted) == 1:
        return converted[0]
    types = {c.get("type") for c in converted}
    if types and types <= {"integer", "string"} and all(len(c) == 1 for c in converted):
        return {"x-kubernetes-int-or-string": True}
    if types <= {"number", "integer"} and None not in types:
        return {"type": "number"}
    return dict(_ANY)


def _object(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    properties = node.get("properties")
    extra = node.get("additionalProperties")
    if properties:
        out: dict[str, Any] = {
            "type": "object",
            "properties": {k: _convert(v, defs, seen) for k, v in sorted(properties.items())},
        }
        if extra not in (None, False):
            out["x-kubernetes-preserve-unknown-fields"] = True
        return out
    if isinstance(extra, dict) and extra:
        return {"type": "object", "additionalProperties": _convert(extra, defs, seen)}
    return dict(_OPEN_OBJECT)


class _Generator(GenerateJsonSchema):
    def function_before_schema(
        self, schema: core_schema.BeforeValidatorFunctionSchema
    ) -> JsonSchemaValue:
        # Durations are ints in our models but "5s" on the wire, as in Istio's CRDs
        if schema["function"].get("function") is parse_duration:
            return {"type": "string"}
        return super().function_before_schema(schema)


def structural_schema(annotation: Any) -> dict[str, Any]:
    """The structural schema of a type (a pydantic model, or a field's annotation)."""
    schema = TypeAdapter(annotation).json_schema(
        by_alias=True, mode="validation", schema_generator=_Generator
    )
    return _convert(schema, schema.get("$defs", {}), ())
