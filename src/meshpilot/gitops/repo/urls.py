"""Repository URLs: normalisation (cache keys, credential matching) and scrubbing."""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

__all__ = ["cache_key", "is_local", "normalize_url", "scrub"]

_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@")


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Remove userinfo from URLs and any known secret strings from `text`."""
    out = _USERINFO.sub(r"\1", text)
    for secret in secrets:
        if secret:
            out = out.replace(secret, "***")
    return out


def is_local(url: str) -> bool:
    return url.startswith(("/", "./", "../", "file://")) or url in (".", "..")


def normalize_url(url: str) -> str:
    """Argo CD style: no credentials, lower-case, no trailing slash or .git; paths absolute."""
    if url.startswith("file://"):
        url = url[len("file://") :]
    if is_local(url):  # absolute paths remembered (a relative one depends on the cwd)
        return _local(url) if url.startswith("/") else "file://" + str(Path(url).resolve())
    out = scrub(url.strip()).lower().rstrip("/")
    return out.removesuffix(".git")


@functools.lru_cache(maxsize=1024)
def _local(path: str) -> str:
    """Remembered: every render and resolve asks, and resolving a path is a few syscalls."""
    return "file://" + str(Path(path).resolve())


def cache_key(url: str) -> str:
    """Directory name for a repository's mirror (spec §3.5: a UUID-like name per URL)."""
    return hashlib.sha256(normalize_url(url).encode()).hexdigest()[:32]
