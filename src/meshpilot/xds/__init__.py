"""Envoy configuration: generators per xDS type, the shared cache, and (later) the ADS server."""
