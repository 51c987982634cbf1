"""`meshpilot version [-o json|short]`: client, control planes (each revision) and data plane.

The control planes are the ones running on this machine (their records in the CA dir);
each one's connected proxies (its /debug/syncz) give the data plane versions, and the
store's IstioOperators the version each revision installs.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import click

from meshpilot import __version__
from meshpilot.istio_version import ISTIO_VERSION
from meshpilot.security.control_plane_record import ControlPlaneRecord, live_records
from meshpilot.settings import default_ca_dir, default_store_dir

__all__ = ["version"]


def _revision_versions(store_url: str) -> dict[str, str]:
    # only with a control plane running: `meshpilot version` alone stays light
    from meshpilot.errors import MeshpilotError
    from meshpilot.install.installation import VERSION_ANNOTATION, installed_operators
    from meshpilot.install.versions import installed_version
    from meshpilot.store.open import open_store

    try:
        objects = open_store(store_url, create=False).snapshot().objects
    except MeshpilotError:
        return {}
    return {
        (op.revision or "default"): op.metadata.annotations.get(VERSION_ANNOTATION)
        or installed_version(op)
        for op in installed_operators(dict(objects))
    }


def _proxies(record: ControlPlaneRecord) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{record.monitoring_port}/debug/syncz"
    try:
        import urllib.request  # only with a control plane to ask: start-up stays light

        with urllib.request.urlopen(url, timeout=3) as response:
            data = json.loads(response.read())
    except (OSError, ValueError):
        return []
    return [p for p in data if isinstance(p, dict)] if isinstance(data, list) else []


def _report(ca_dir: Path, store_url: str) -> dict[str, Any]:
    records = sorted(live_records(ca_dir), key=lambda r: (r.revision, r.pid))
    versions = _revision_versions(store_url) if records else {}
    mesh, data_plane = [], []
    for record in records:
        revision = record.revision or "default"
        mesh.append({"Component": "pilot", "Revision": revision, "Pid": record.pid,
                     "Info": {"version": versions.get(revision, ISTIO_VERSION)}})  # fmt: skip
        for proxy in _proxies(record) if record.monitoring_port else []:
            data_plane.append({"ID": proxy.get("proxy", proxy.get("node_id", "")),
                               "IstioVersion": proxy.get("istio_version", ""),
                               "Revision": revision})  # fmt: skip
    return {
        "clientVersion": {"version": ISTIO_VERSION, "meshpilot": __version__},
        "meshVersion": mesh,
        "dataPlaneVersion": data_plane,
    }


def _counted(values: list[str], unit: str) -> str:
    counts = Counter(values)
    return ", ".join(f"{v} ({n} {unit}{'s' if n != 1 else ''})" for v, n in sorted(counts.items()))


@click.command()
@click.option("-o", "--output", type=click.Choice(["text", "json", "short"]), default="text")
@click.option("--remote/--no-remote", default=True, help="Also ask running control planes.")
@click.option(
    "--ca-dir",
    metavar="DIR",
    help="CA dir of the control planes (their records).  "
    "[default: $MESHPILOT_CA_DIR or ~/.meshpilot/ca]",
)
@click.option("--store", "store_dir", metavar="URL", help="Live store (installed versions).")
def version(output: str, remote: bool, ca_dir: str | None, store_dir: str | None) -> None:
    """Print the client version, each control plane's and the data plane's."""
    if output == "short" or not remote:
        click.echo(ISTIO_VERSION if output == "short" else f"client version: {ISTIO_VERSION}")
        return
    ca = Path(ca_dir or os.environ.get("MESHPILOT_CA_DIR") or default_ca_dir()).absolute()
    report = _report(ca, store_dir or default_store_dir())
    if output == "json":
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"client version: {ISTIO_VERSION} (meshpilot {__version__})")
    planes = [f"{m['Info']['version']} (revision {m['Revision']})" for m in report["meshVersion"]]
    click.echo(f"control plane version: {', '.join(planes) or 'no control plane running'}")
    proxies = [p["IstioVersion"] for p in report["dataPlaneVersion"]]
    click.echo(f"data plane version: {_counted(proxies, 'proxy') or 'no proxies connected'}")
