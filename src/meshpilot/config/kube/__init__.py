"""Typed models of the Kubernetes kinds meshpilot reads (a subset of each kind's fields)."""
