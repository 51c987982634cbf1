"""One factory from a store URL (DESIGN.md, "Stores and scale"): every `--store` goes here.

    DIR | file:///DIR                           the directory store (store/directory/)
    etcd://host:port[,host:port...]/prefix      etcd (store/etcd/); TLS: etcd+https://...
                                                ?cacert=FILE&cert=FILE&key=FILE
    kube://[context]                            the Kubernetes API (store/kube/): a kubeconfig
                                                context, or in-cluster config; never taken
                                                for a relative directory named `kube:`

Reads never create state: `open_store(url, create=False)` on a path that holds no store says
so (`NoStoreError`) and leaves the filesystem alone; only writers pass `create=True`. An etcd
prefix needs no creating: an empty one is an empty store.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from urllib.parse import unquote, urlsplit

from meshpilot.config.kinds import Kind
from meshpilot.errors import MeshpilotError
from meshpilot.store.base import WatchedStore
from meshpilot.store.directory import DirectoryStore, StoreError
from meshpilot.store.directory.store_dir import MARKER
from meshpilot.store.etcd import ETCD_SCHEMES, parse_etcd_url
from meshpilot.store.kube import KUBE_SCHEME, parse_kube_url

__all__ = [
    "NoStoreError",
    "StoreUrlError",
    "is_etcd_url",
    "is_kube_url",
    "open_directory_store",
    "open_store",
    "store_path",
]

# RFC 3986 scheme followed by "://"; a bare "c:" or "name:x" stays a directory name.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_DIRECTORY_SCHEMES = frozenset({"file"})


class StoreUrlError(MeshpilotError):
    """A store URL names a backend that is not supported (yet), or is malformed."""


class NoStoreError(MeshpilotError):
    """A read found no store at the path (nothing was created)."""


def store_path(url: str) -> Path:
    """The directory a store URL names: a plain path or `file://`; other schemes refused."""
    match = _URL.match(url)
    if match is None:
        if not url.strip():
            raise StoreUrlError("empty store path: give a directory")
        return Path(url).expanduser()
    scheme = match.group(1).lower()
    if scheme in ETCD_SCHEMES:
        raise StoreUrlError(f"{url!r} is an etcd store, not a directory")
    if scheme == KUBE_SCHEME:
        raise StoreUrlError(f"{url!r} is a Kubernetes API store, not a directory")
    if scheme not in _DIRECTORY_SCHEMES:
        raise StoreUrlError(
            f"store URL scheme {match.group(1)!r} is not supported; give a directory "
            f"(a path or file:///path), etcd://host:port/prefix or kube://[context], "
            f"not {url!r}"
        )
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost") or not parts.path:
        raise StoreUrlError(f"{url!r}: a file URL names a local directory: file:///path")
    return Path(unquote(parts.path))


def is_etcd_url(url: str) -> bool:
    match = _URL.match(url)
    return match is not None and match.group(1).lower() in ETCD_SCHEMES


def is_kube_url(url: str) -> bool:
    match = _URL.match(url)
    return match is not None and match.group(1).lower() == KUBE_SCHEME


def open_store(url: str, *, create: bool, skip_kinds: Collection[Kind] = ()) -> WatchedStore:
    """The store at `url`. `create=False` (reads): NoStoreError when there is none, and
    nothing is created; `create=True` (writes): an absent store is created, 0700."""
    if is_etcd_url(url):
        target = parse_etcd_url(url)
        try:  # gRPC and etcd's protos: only for an etcd store
            from meshpilot.store.etcd.backend import EtcdStore
        except ImportError as exc:
            raise StoreUrlError(
                f"{url}: the etcd store needs the aetcd package (pip install aetcd): {exc}"
            ) from exc
        return EtcdStore(target, skip_kinds=skip_kinds)
    if is_kube_url(url):
        kube = parse_kube_url(url)
        try:  # the kubernetes client: only for a kube:// store
            from meshpilot.store.kube.backend import KubeStore
        except ImportError as exc:
            raise StoreUrlError(
                f"{url}: the Kubernetes store needs the kubernetes package "
                f"(pip install kubernetes): {exc}"
            ) from exc
        return KubeStore(kube, skip_kinds=skip_kinds)
    return open_directory_store(url, create=create, skip_kinds=skip_kinds)


def open_directory_store(
    url: str, *, create: bool, skip_kinds: Collection[Kind] = ()
) -> DirectoryStore:
    """The directory store at `url` (what needs a directory: the GitOps controller's locks
    and state live beside the store); any other backend is refused."""
    path = store_path(url)
    if not create and not (path / MARKER).exists():
        try:
            empty = not path.exists() or (path.is_dir() and not any(path.iterdir()))
        except OSError as exc:
            raise StoreError(f"{path}: cannot read the store: {exc.strerror}") from exc
        if empty:
            raise NoStoreError(f"no store at {path}: nothing has been applied there yet")
    return DirectoryStore(path, create=create, skip_kinds=skip_kinds)
