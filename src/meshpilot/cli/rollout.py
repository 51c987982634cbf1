"""`meshpilot rollout restart|status deployment/NAME -n NS`, as kubectl's, on the live store.

`restart` sets the pod template's `kubectl.kubernetes.io/restartedAt` annotation (kubectl's
RFC 3339 time): a new template, so `meshpilot run` replaces the pods one by one. `status`
waits until the store's Pods of the Deployment are all of its current template, as many as
its replicas, and says so as kubectl does.
"""

from __future__ import annotations

import datetime as dt
import time

import click

from meshpilot.cli.live import open_store, store_option, user_errors
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.runtime.run.workloads import template_hash
from meshpilot.store.base import WatchedStore

__all__ = ["RESTARTED_AT", "rollout"]

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


@click.group()
def rollout() -> None:
    """Restart a Deployment's pods or follow its rollout (kubectl rollout)."""


def _deployment(what: str) -> str:
    kind, slash, name = what.partition("/")
    if not slash or kind not in ("deployment", "deployments", "deploy", "deployment.apps") \
            or not name:  # fmt: skip
        raise click.BadParameter(f"{what!r}: expected deployment/NAME", param_hint="RESOURCE")
    return name


def _get(store: WatchedStore, namespace: str, name: str) -> dict[str, object]:
    manifest = store.manifest(ConfigKey(Kind.DEPLOYMENT, namespace, name))
    if manifest is None:
        raise click.ClickException(f'deployments.apps "{name}" not found in namespace {namespace}')
    return manifest


@rollout.command()
@click.argument("resource")
@click.option("-n", "--namespace", default="default", show_default=True)
@store_option
@user_errors
def restart(resource: str, namespace: str, store_dir: str | None) -> None:
    """Re-create a Deployment's pods, one at a time (a new restartedAt annotation)."""
    name = _deployment(resource)
    store = open_store(store_dir, create=False)
    manifest = _get(store, namespace, name)
    spec = manifest.setdefault("spec", {})
    assert isinstance(spec, dict)
    meta = spec.setdefault("template", {}).setdefault("metadata", {})
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta["annotations"] = {**(meta.get("annotations") or {}), RESTARTED_AT: now}
    store.apply([RawDocument("<rollout restart>", 1, manifest, {})])
    click.echo(f"deployment.apps/{name} restarted")


def _progress(store: WatchedStore, namespace: str, name: str) -> str:
    """kubectl's waiting line, or "" when the rollout is complete."""
    manifest = _get(store, namespace, name)
    spec = manifest.get("spec") or {}
    assert isinstance(spec, dict)
    replicas = spec.get("replicas", 1)
    current = template_hash(spec.get("template") or {})
    updated = old = 0
    for obj in store.snapshot().of_kind(Kind.POD):
        if obj.key.namespace != namespace:
            continue
        owners = obj.model.metadata.owner_references
        if not any(str(o.get("name", "")).startswith(f"{name}-") for o in owners):
            continue
        if obj.model.metadata.labels.get("pod-template-hash") == current:
            updated += 1
        else:
            old += 1
    waiting = f'Waiting for deployment "{name}" rollout to finish: '
    if updated < replicas:
        return waiting + f"{updated} out of {replicas} new replicas have been updated..."
    if old:
        return waiting + f"{old} old replicas are pending termination..."
    return ""


@rollout.command()
@click.argument("resource")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--timeout", type=click.FloatRange(0), default=0, help="Seconds; 0: no limit.")
@store_option
@user_errors
def status(resource: str, namespace: str, timeout: float, store_dir: str | None) -> None:
    """Wait until a Deployment's pods are all of its current template."""
    name = _deployment(resource)
    store = open_store(store_dir, create=False)
    deadline = time.monotonic() + timeout if timeout else None
    said = ""
    while line := _progress(store, namespace, name):
        if line != said:
            click.echo(line)
            said = line
        if deadline is not None and time.monotonic() > deadline:
            raise click.ClickException("timed out waiting for the condition")
        time.sleep(0.5)
        store.refresh()
    click.echo(f'deployment "{name}" successfully rolled out')
