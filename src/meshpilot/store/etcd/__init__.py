"""The etcd backend: the live store on etcd's v3 API (backend.py), `etcd://` URLs (target.py)."""

from __future__ import annotations

from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.client import EtcdError
from meshpilot.store.etcd.target import ETCD_SCHEMES, EtcdTarget, EtcdUrlError, parse_etcd_url

__all__ = ["ETCD_SCHEMES", "EtcdError", "EtcdStore", "EtcdTarget", "EtcdUrlError", "parse_etcd_url"]
