"""The path as a Graphviz graph (DOT text): one box per hop, outbound and inbound in two
clusters, the failing hop red. `dot -Tsvg` (cli/explain.py) lays it out."""

from __future__ import annotations

from meshpilot.explain.result import Explanation, Hop

__all__ = ["render_dot"]


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _clip(text: str, width: int) -> str:
    """At most `width` characters; a cut line ends in an ellipsis, so it reads as cut."""
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _label(hop: Hop) -> str:
    lines = [hop.stage.replace("_", " "), _clip(hop.envoy, 60), _clip(hop.summary, 90)]
    lines += [str(o) for o in hop.objects[:2]]
    return "\\n".join(_quote(line)[1:-1] for line in lines if line)


def render_dot(ex: Explanation) -> str:
    out = ex.outcome
    req = ex.request
    title = f"{ex.proxy}: {req.method} {req.url}"
    lines = [
        "digraph explain {",
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname=Helvetica];',
        f"  label={_quote(title)}; labelloc=t; fontname=Helvetica;",
    ]
    for side in ("outbound", "gateway", "inbound"):
        hops = [(i, h) for i, h in enumerate(ex.hops) if h.side == side]
        if not hops:
            continue
        lines.append(f'  subgraph cluster_{side} {{ label={_quote(side)}; color="#8899aa";')
        for i, hop in hops:
            lines.append(f'    h{i} [label="{_label(hop)}"];')
        lines.append("  }")
    for i in range(1, len(ex.hops)):
        lines.append(f"  h{i - 1} -> h{i};")
    verdict = f"delivered to {out.destination}" if out.delivered else f"dies at {out.dies_at}"
    code = f" ({out.code})" if out.code is not None else ""
    color = "#d9f2d9" if out.delivered else "#f8d0d0"
    text = _quote(f"{verdict}{code}\n{out.reason[:80]}")
    lines.append(f'  result [label={text}, fillcolor="{color}"];')
    if ex.hops:
        lines.append(f"  h{len(ex.hops) - 1} -> result;")
        if not out.delivered:
            lines.append(f'  h{len(ex.hops) - 1} [fillcolor="#f8d0d0"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
