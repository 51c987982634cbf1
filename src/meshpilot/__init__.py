"""meshpilot: an Istio-compatible service mesh control plane and GitOps delivery engine."""

__version__ = "0.1.0"

__all__ = ["__version__"]
