"""The readable form: one block per hop, the object behind it, and where the request ends."""

from __future__ import annotations

from meshpilot.explain.result import Explanation

__all__ = ["render_text"]


def render_text(ex: Explanation) -> str:
    req = ex.request
    head = f"{ex.proxy} ({ex.proxy_type}): "
    head += f"{req.method} {req.url}" if req.scheme in ("http", "https") else req.url
    lines = [head, *(f"  -H '{k}: {v}'" for k, v in req.headers)]
    side = ""
    for n, hop in enumerate(ex.hops, 1):
        if hop.side != side:
            side = hop.side
            heads = {"outbound": f"outbound ({ex.proxy})", "gateway": "gateway (the next proxy)"}
            lines.append(heads.get(side, "inbound (destination sidecar)"))
        envoy = f" [{hop.envoy}]" if hop.envoy else ""
        lines.append(f"{n:>3}. {hop.stage}{envoy}: {hop.summary}")
        lines.extend(f"       {d}" for d in hop.details)
        lines.extend(f"       <- {o}" for o in hop.objects)
    out = ex.outcome
    code = (
        f"HTTP {out.code}"
        if out.code is not None
        else ("TCP" if req.scheme in ("tcp", "tls") else "")
    )
    if out.delivered:
        verdict = f"DELIVERED to {out.destination}" + (f" ({code})" if code and out.code else "")
    else:
        verdict = f"DIES at {out.dies_at}" + (f": {code}" if out.code is not None else "")
    lines.append(f"result: {verdict}: {out.reason}")
    if out.cluster:
        lines.append(f"upstream cluster: {out.cluster}")
    if out.flags:
        lines.append(f"response flags: {out.flags}")
    if out.branches:
        total = sum(w for _, w in out.branches) or 1
        shares = (f"{c} ({100 * w / total:g}%)" for c, w in out.branches)
        lines.append(f"any of: {', '.join(shares)}")
    lines.extend(f"note: {n}" for n in ex.notes)
    return "\n".join(lines)
