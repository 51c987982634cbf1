"""Helpers of the B6 benchmark (bench/mtls_latency.py): network namespaces, proxies, load."""
