"""The ProxyConfig kind: selector, concurrency, image type and environment variables (Istio's
validateProxyConfig)."""

from __future__ import annotations

from meshpilot.config.istio.proxy_config_kind import ProxyConfigResource
from meshpilot.config.validation.common import Path, Problems, check_selector, quoted

__all__ = ["validate_proxy_config"]

SPEC: Path = ("spec",)
# The image variants Istio publishes; another value names a tag suffix that may not exist.
IMAGE_TYPES = ("default", "debug", "distroless")


def validate_proxy_config(config: ProxyConfigResource, p: Problems) -> None:
    spec = config.spec
    if spec.selector is not None:
        check_selector(
            p, (*SPEC, "selector", "matchLabels"), spec.selector.match_labels, "ProxyConfig"
        )
    if spec.concurrency is not None and spec.concurrency < 0:
        p.error(
            (*SPEC, "concurrency"),
            f"concurrency must be greater than or equal to 0 (got {spec.concurrency})",
        )
    for name in spec.environment_variables:
        if not name or "=" in name:
            p.error(
                (*SPEC, "environmentVariables", name),
                f"invalid environment variable name {quoted(name)}",
            )
    image_type = spec.image.image_type if spec.image is not None else ""
    if image_type and image_type not in IMAGE_TYPES:
        p.warning(
            (*SPEC, "image", "imageType"),
            f"image type {quoted(image_type)} is not one of Istio's: {', '.join(IMAGE_TYPES)}",
        )
