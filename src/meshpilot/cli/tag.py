"""`meshpilot tag set | list | remove | generate` (istioctl tag) on the live store."""

from __future__ import annotations

import click
import yaml

from meshpilot.cli.live import open_store, store_option, user_errors
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.install.manifest import NoAliasDumper
from meshpilot.install.tags import (
    TAG_PREFIX,
    TagError,
    deactivated_default,
    tag_manifest,
    tag_rows,
)
from meshpilot.store.base import WatchedStore
from meshpilot.text_table import render_table

__all__ = ["tag"]

Manifest = dict[str, object]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def tag() -> None:
    """Revision tags: a stable name (e.g. `default`, `prod`) for namespaces to label
    `istio.io/rev=<tag>` with, moved from one revision to the next at upgrade time."""


def _build(store: WatchedStore, name: str, revision: str, overwrite: bool) -> list[Manifest]:
    objects = store.snapshot().objects
    manifests = {
        k: m
        for k in objects
        if k.kind is Kind.MUTATING_WEBHOOK_CONFIGURATION and (m := store.manifest(k)) is not None
    }
    out: list[Manifest] = [tag_manifest(objects, manifests, name, revision, overwrite=overwrite)]
    if name == "default":
        legacy = deactivated_default(manifests)
        if legacy is not None:
            out.append(legacy)
    return out


_revision_option = click.option("--revision", "-r", required=True, help="The revision to tag.")


@tag.command("set")
@click.argument("name")
@_revision_option
@click.option("--overwrite", is_flag=True, help="Move an existing tag to this revision.")
@click.option("-y", "--skip-confirmation", "yes", is_flag=True, help="Do not ask.")
@store_option
@user_errors
def set_tag(name: str, revision: str, overwrite: bool, yes: bool, store_dir: str | None) -> None:
    """Point tag NAME at a revision (creates or rewrites istio-revision-tag-NAME)."""
    store = open_store(store_dir, create=False)
    documents = _build(store, name, revision, overwrite)
    store.apply([RawDocument(f"<tag {name}>", 1, d, {}) for d in documents])
    click.echo(f'Revision tag "{name}" created, referencing control plane revision "{revision}".')
    click.echo("To enable injection using this revision tag, use "
               f"'kubectl label namespace <NAMESPACE> istio.io/rev={name}'")  # fmt: skip


@tag.command("generate")
@click.argument("name")
@_revision_option
@click.option("--overwrite", is_flag=True, help="As for `tag set`.")
@store_option
@user_errors
def generate(name: str, revision: str, overwrite: bool, store_dir: str | None) -> None:
    """Print what `tag set` would write, without writing it."""
    store = open_store(store_dir, create=False)
    for document in _build(store, name, revision, overwrite):
        click.echo("---")
        click.echo(yaml.dump(document, Dumper=NoAliasDumper, sort_keys=False), nl=False)


@tag.command("list")
@store_option
@user_errors
def list_tags(store_dir: str | None) -> None:
    """TAG, REVISION and the NAMESPACES labelled istio.io/rev=TAG."""
    store = open_store(store_dir, create=False)
    rows = tag_rows(store.snapshot().objects)
    if not rows:
        click.echo("No Istio revision tag MutatingWebhookConfigurations to list")
        return
    table = [["TAG", "REVISION", "NAMESPACES"]]
    table += [[r.tag, r.revision, ",".join(r.namespaces)] for r in rows]
    click.echo(render_table(table))


@tag.command("remove")
@click.argument("name")
@click.option("-y", "--skip-confirmation", "yes", is_flag=True, help="Do not ask.")
@store_option
@user_errors
def remove(name: str, yes: bool, store_dir: str | None) -> None:
    """Remove tag NAME; asks first when namespaces still use it."""
    store = open_store(store_dir, create=False)
    row = next((r for r in tag_rows(store.snapshot().objects) if r.tag == name), None)
    if row is None:
        raise TagError(f'cannot remove tag "{name}": there is no revision tag "{name}"')
    if row.namespaces and not yes:
        question = (
            f'Revision tag "{name}" is in use by namespaces {", ".join(row.namespaces)}: '
            "their new pods will get no sidecar. Remove it?"
        )
        if not click.confirm(question, default=False):
            raise click.ClickException("cancelled: the tag was not removed")
    store.delete([ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", TAG_PREFIX + name)])
    click.echo(f"Revision tag {name} removed")
