"""B6 figures: medians over rounds, ratios, and the README table."""

from __future__ import annotations

import statistics
from typing import Any

VARIANTS = ("direct", "ads", "twin")
PERCENTILES = (50, 90, 99)
LABELS = {
    "direct": "(a) direct: load -> app",
    "ads": "(b) two sidecars, mTLS, config over our ADS",
    "twin": "(c) the same two sidecars, same resources from a static file",
}


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Median of each percentile (ms) and of CPU per proxy over the rounds of each variant."""
    med: dict[str, dict[str, float]] = {}
    for variant, rounds in runs.items():
        med[variant] = {
            f"p{p}": statistics.median(r["ms"][f"p{p}"] for r in rounds) for p in PERCENTILES
        }
        for proxy in ("client", "server", "upstream"):
            values = [r["vcpu_per_krps"][proxy] for r in rounds if proxy in r["vcpu_per_krps"]]
            if values:
                med[variant][f"vcpu_{proxy}"] = statistics.median(values)
    out: dict[str, Any] = {"median_ms": med}
    if {"ads", "twin", "direct"} <= med.keys():
        a, b, c = med["direct"], med["ads"], med["twin"]
        out["ads_over_twin"] = {f"p{p}": b[f"p{p}"] / c[f"p{p}"] for p in PERCENTILES}
        out["ads_minus_direct_ms"] = {f"p{p}": b[f"p{p}"] - a[f"p{p}"] for p in PERCENTILES}
        out["twin_minus_direct_ms"] = {f"p{p}": c[f"p{p}"] - a[f"p{p}"] for p in PERCENTILES}
        out["added_ads_over_added_twin"] = {
            f"p{p}": (b[f"p{p}"] - a[f"p{p}"]) / (c[f"p{p}"] - a[f"p{p}"])
            for p in PERCENTILES
            if c[f"p{p}"] > a[f"p{p}"]
        }
        out["per_round_ads_over_twin_p90"] = [
            rb["ms"]["p90"] / rc["ms"]["p90"]
            for rb, rc in zip(runs["ads"], runs["twin"], strict=False)
        ]
    return out


def markdown(summary: dict[str, Any], rounds: int, requests: int, rps: float) -> str:
    med = summary["median_ms"]
    rows = [
        f"| B6, medians of {rounds} rounds, {requests} requests at {rps:g} rps | p50 | p90 "
        "| p99 | vCPU per 1000 rps (client / server sidecar) |",
        "|---|---|---|---|---|",
    ]
    for v in VARIANTS:
        if v not in med:
            continue
        m = med[v]
        cpu = (
            f"{m['vcpu_client']:.3f} / {m['vcpu_server']:.3f}"
            if "vcpu_client" in m and "vcpu_server" in m
            else ""
        )
        rows.append(
            f"| {LABELS[v]} | {m['p50']:.3f} ms | {m['p90']:.3f} ms | {m['p99']:.3f} ms | {cpu} |"
        )
    if "ads_over_twin" in summary:
        r, d = summary["ads_over_twin"], summary["ads_minus_direct_ms"]
        t = summary["twin_minus_direct_ms"]
        rows.append(
            f"| ratio (b)/(c) (target <= 1.05) | {r['p50']:.3f} | {r['p90']:.3f} "
            f"| {r['p99']:.3f} | |"
        )
        rows.append(
            f"| added by the two sidecars, (b)-(a) (Istio 1.20: +0.228 p90, +0.298 p99) "
            f"| {d['p50']:+.3f} ms | {d['p90']:+.3f} ms | {d['p99']:+.3f} ms | |"
        )
        rows.append(
            f"| added with the static twin, (c)-(a) | {t['p50']:+.3f} ms | {t['p90']:+.3f} ms "
            f"| {t['p99']:+.3f} ms | |"
        )
    return "\n".join(rows)
