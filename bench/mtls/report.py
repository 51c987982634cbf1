"""B6 figures: medians over rounds, ratios, connection reuse, and the README table."""

from __future__ import annotations

import statistics
from typing import Any

VARIANTS = ("direct", "redirect", "plain", "plain-mtls", "ads", "twin")
PERCENTILES = (50, 90, 99)
PACING_SUFFIXES = ("", "@grid", "@burst")  # paced (no suffix), grid and burst loads
LABELS = {
    "direct": "(a) direct: load -> app",
    "redirect": "(a') direct through an iptables REDIRECT (the capture rule, no Envoy)",
    "plain": "(p) two plain Envoys, hand-written static config, HTTP",
    "plain-mtls": "(p') the same two plain Envoys with mutual TLS",
    "ads": "(b) two sidecars, mTLS, config over our ADS",
    "twin": "(c) the same two sidecars, same resources from a static file",
}


def variant_key(variant: str, pacing: str) -> str:
    return variant if pacing == "paced" else f"{variant}@{pacing}"


def _label(key: str) -> str:
    variant, _, pacing = key.partition("@")
    return LABELS.get(variant, variant) + (f", {pacing} load" if pacing else "")


def _reuse(rounds: list[dict[str, Any]]) -> dict[str, int]:
    """Client upstream connections/requests and TLS handshakes per side, last round."""
    stats = rounds[-1].get("stats")
    if not stats:
        return {}

    def total(role: str, suffix: str, skip: tuple[str, ...] = ("xds-grpc", "sds-grpc")) -> int:
        return sum(
            v
            for k, v in stats.get(role, {}).items()
            if k.endswith(suffix) and not any(s in k for s in skip)
        )

    return {
        "client_upstream_cx": total("client", ".upstream_cx_total"),
        "client_upstream_rq": total("client", ".upstream_rq_total"),
        "client_tls_handshakes": total("client", "ssl.handshake"),
        "server_tls_handshakes": total("server", "ssl.handshake"),
        "server_downstream_cx": total("server", "downstream_cx_total", ("admin",)),
    }


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Median of each percentile (ms), of CPU per proxy and of the load average per variant."""
    med: dict[str, dict[str, float]] = {}
    for key, rounds in runs.items():
        med[key] = {
            f"p{p}": statistics.median(r["ms"][f"p{p}"] for r in rounds) for p in PERCENTILES
        }
        for field in ("burst_share", "load_average_1m"):
            med[key][field] = statistics.median(r.get(field, 0.0) for r in rounds)
        for proxy in ("client", "server", "upstream"):
            values = [r["vcpu_per_krps"][proxy] for r in rounds if proxy in r["vcpu_per_krps"]]
            if values:
                med[key][f"vcpu_{proxy}"] = statistics.median(values)
    out: dict[str, Any] = {"median_ms": med}
    out["connection_reuse"] = {k: _reuse(r) for k, r in runs.items() if _reuse(r)}
    for suffix in PACING_SUFFIXES:
        a, b, c = (med.get(v + suffix) for v in ("direct", "ads", "twin"))
        if a is None:
            continue
        out[f"added_over_direct_ms{suffix}"] = {
            key: {f"p{p}": m[f"p{p}"] - a[f"p{p}"] for p in PERCENTILES}
            for key, m in med.items()
            if key.endswith(suffix) and (suffix or "@" not in key) and m is not a
        }
        if b and c:
            out[f"ads_over_twin{suffix}"] = {f"p{p}": b[f"p{p}"] / c[f"p{p}"] for p in PERCENTILES}
    return out


def markdown(summary: dict[str, Any], rounds: int, requests: int, rps: float) -> str:
    med = summary["median_ms"]
    rows = [
        f"| B6, medians of {rounds} rounds, {requests} requests at {rps:g} rps | p50 | p90 "
        "| p99 | added p90 vs direct | vCPU per 1000 rps (client / server) | load avg |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, m in med.items():
        suffix = "@" + key.partition("@")[2] if "@" in key else ""
        added = summary.get(f"added_over_direct_ms{suffix}", {}).get(key)
        cpu = (
            f"{m['vcpu_client']:.3f} / {m['vcpu_server']:.3f}"
            if "vcpu_client" in m and "vcpu_server" in m
            else ""
        )
        plus = f"{added['p90']:+.3f} ms" if added else ""
        rows.append(
            f"| {_label(key)} | {m['p50']:.3f} ms | {m['p90']:.3f} ms | {m['p99']:.3f} ms "
            f"| {plus} | {cpu} "
            f"| {m['load_average_1m']:.2f} |"
        )
    for suffix in PACING_SUFFIXES:
        if r := summary.get(f"ads_over_twin{suffix}"):
            rows.append(
                f"| ratio (b)/(c){suffix} (target <= 1.05) | {r['p50']:.3f} | {r['p90']:.3f} "
                f"| {r['p99']:.3f} | | | |"
            )
    return "\n".join(rows)
