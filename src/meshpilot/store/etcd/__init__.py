"""The etcd backend: the live store on etcd's v3 API.

backend.py   EtcdStore (imports the gRPC client: store/open.py imports it only for an
             etcd:// URL, so that other commands do not pay for it)
target.py    etcd:// URLs; errors.py its errors; client.py, watch.py, codec.py
"""

from __future__ import annotations

from meshpilot.store.etcd.errors import EtcdError, EtcdUrlError
from meshpilot.store.etcd.target import ETCD_SCHEMES, EtcdTarget, parse_etcd_url

__all__ = ["ETCD_SCHEMES", "EtcdError", "EtcdTarget", "EtcdUrlError", "parse_etcd_url"]
