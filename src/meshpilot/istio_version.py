"""The Istio version meshpilot speaks: what its proxies report (node metadata ISTIO_VERSION)
and what `install` installs unless told a tag. Its own module so that `meshpilot version`
reads it without loading the object models."""

from __future__ import annotations

__all__ = ["ISTIO_VERSION"]

ISTIO_VERSION = "1.28.0"
