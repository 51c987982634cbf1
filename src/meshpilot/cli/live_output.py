"""How `meshpilot get` prints objects: kubectl's table (NAME, the kind's columns, AGE),
`-o wide`, `-o name`, and `-o yaml|json` (one object, or a `kind: List`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click
import yaml

from meshpilot.store.resources import ResourceType
from meshpilot.text_table import render_table

__all__ = ["human_age", "print_objects"]

Manifest = dict[str, Any]


def human_age(created: str | None, now: datetime | None = None) -> str:
    """kubectl's HumanDuration of an object's age: 45s, 3m20s, 42m, 5h10m, 3d4h, 400d."""
    if not created:
        return "<unknown>"
    try:
        then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def print_objects(
    rtype: ResourceType, manifests: Sequence[Manifest], output: str, show_ns: bool, single: bool
) -> None:
    if output in ("yaml", "json"):
        doc: Any = manifests[0] if single and manifests else _as_list(manifests)
        if output == "json":
            click.echo(json.dumps(doc, indent=4))
        else:
            click.echo(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), nl=False)
        return
    if output == "name":
        for obj in manifests:
            click.echo(rtype.display_name(obj["metadata"]["name"]))
        return
    if manifests:
        click.echo(_table(rtype, manifests, wide=output == "wide", show_ns=show_ns))


def _as_list(manifests: Sequence[Manifest]) -> Manifest:
    return {
        "apiVersion": "v1",
        "items": list(manifests),
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }


def _table(rtype: ResourceType, manifests: Sequence[Manifest], wide: bool, show_ns: bool) -> str:
    columns = [c for c in rtype.columns if wide or not c.wide_only]
    header = [*(["NAMESPACE"] if show_ns else []), "NAME", *(c.header for c in columns), "AGE"]
    rows = [header]
    for obj in manifests:
        meta = obj.get("metadata") or {}
        rows.append(
            [
                *([meta.get("namespace", "")] if show_ns else []),
                str(meta.get("name", "")),
                *(c.value(obj) or "<none>" for c in columns),
                human_age(meta.get("creationTimestamp")),
            ]
        )
    return render_table(rows, gap=3)
