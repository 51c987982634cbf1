"""YAML for the store's object files: libyaml when PyYAML was built with it (the
pure-Python loader and dumper are several times slower, and every drift check reads)."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["YAMLError", "dump_manifest", "load_manifest"]

YAMLError = yaml.YAMLError
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_manifest(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def dump_manifest(manifest: dict[str, Any]) -> str:
    return str(yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, default_flow_style=False))
