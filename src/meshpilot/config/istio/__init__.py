"""Typed models of the Istio networking API (networking.istio.io v1alpha3, v1beta1, v1)."""
