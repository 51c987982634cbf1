"""Config stores: the ConfigStore interface and its backends (DESIGN.md, "Stores and scale")."""

from __future__ import annotations

from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, ConfigStore, StoreSnapshot
from meshpilot.store.files import FileStore

__all__ = [
    "MESH_KEY",
    "ChangeEvent",
    "ChangeHandler",
    "ConfigStore",
    "FileStore",
    "StoreSnapshot",
]
