"""`-o json` and `-o yaml`: the raw resources, as istioctl prints them (JSON indented; YAML
converted from it, keys in their original order)."""

from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = ["OUTPUTS", "render_raw"]

OUTPUTS = ("short", "json", "yaml")  # istioctl's -o values; "short" is the table


def render_raw(data: Any, output: str) -> str:
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100).rstrip()
    return json.dumps(data, indent=2)
