"""The bootstrap as the file Envoy reads (`-c`) and as config_dump shows it."""

from __future__ import annotations

import json
from typing import Any

from envoy.config.bootstrap.v3 import bootstrap_pb2
from google.protobuf import json_format

__all__ = ["bootstrap_dict", "bootstrap_json"]


def bootstrap_dict(boot: bootstrap_pb2.Bootstrap) -> dict[str, Any]:
    """config_dump style: snake_case field names, `@type` on Any values; whole numbers in
    metadata (Struct doubles) written as integers."""
    result: dict[str, Any] = _whole_numbers(
        json_format.MessageToDict(boot, preserving_proto_field_name=True)
    )
    return result


def bootstrap_json(boot: bootstrap_pb2.Bootstrap) -> str:
    """The file Envoy reads (`-c`): deterministic, keys sorted."""
    return json.dumps(bootstrap_dict(boot), indent=2, sort_keys=True) + "\n"


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
