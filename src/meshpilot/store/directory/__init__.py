"""The directory backend: the embedded live store, one YAML file per object (backend.py)."""

from __future__ import annotations

from meshpilot.store.directory.backend import DirectoryStore
from meshpilot.store.directory.store_dir import StoreError

__all__ = ["DirectoryStore", "StoreError"]
