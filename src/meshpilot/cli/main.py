"""The `meshpilot` command."""

from __future__ import annotations

import os
import sys

import click

from meshpilot import __version__
from meshpilot.cli.lazy_group import LazyCommand, LazyGroup
from meshpilot.errors import MeshpilotError

__all__ = ["COMMANDS", "cli", "main"]

DEBUG_ENV = "MESHPILOT_DEBUG"  # set to 1 to see the traceback of an internal error

# Every command, imported only when it runs (see lazy_group.py).
COMMANDS: dict[str, LazyCommand] = {
    "analyze": LazyCommand(
        "meshpilot.cli.analyze:analyze",
        "Report invalid objects and broken references (istioctl analyze).",
    ),
    "apply": LazyCommand(
        "meshpilot.cli.live:apply", "Create or update objects in the live store (kubectl apply)."
    ),
    "delete": LazyCommand(
        "meshpilot.cli.live:delete", "Delete objects from the live store (kubectl delete)."
    ),
    "demo": LazyCommand("meshpilot.cli.demo:demo", "Run a bookinfo-like mesh on this machine."),
    "discovery": LazyCommand(
        "meshpilot.cli.discovery:discovery", "Serve Envoy configuration (the control plane)."
    ),
    "explain": LazyCommand(
        "meshpilot.cli.explain:explain",
        "Explain a request's path through the mesh, hop by hop, with the config behind each.",
    ),
    "get": LazyCommand("meshpilot.cli.live:get", "Show objects of the live store (kubectl get)."),
    "gitops": LazyCommand(
        "meshpilot.cli.gitops:gitops",
        "GitOps delivery from Git into the live store (Argo CD style).",
    ),
    "iptables": LazyCommand(
        "meshpilot.cli.iptables:iptables", "Install Istio's traffic capture rules (istio-iptables)."
    ),
    "kube-inject": LazyCommand(
        "meshpilot.cli.kube_inject:kube_inject",
        "Add sidecars to the pods of Kubernetes files (istioctl kube-inject).",
    ),
    "manifest": LazyCommand(
        "meshpilot.cli.manifest:manifest",
        "Render an installation's Kubernetes manifests (istioctl manifest generate | diff).",
    ),
    "operator": LazyCommand(
        "meshpilot.cli.operator:operator",
        "Run the control plane of every IstioOperator in the store (Istio's operator).",
    ),
    "install": LazyCommand(
        "meshpilot.cli.install:install",
        "Install a control plane revision into the live store (istioctl install).",
    ),
    "uninstall": LazyCommand(
        "meshpilot.cli.install:uninstall",
        "Remove a control plane revision, or everything (istioctl uninstall).",
    ),
    "tag": LazyCommand(
        "meshpilot.cli.tag:tag", "Revision tags: set, list, remove, generate (istioctl tag)."
    ),
    "version": LazyCommand(
        "meshpilot.cli.version_cmd:version",
        "Print the client, control plane and data plane versions (istioctl version).",
    ),
    "x": LazyCommand("meshpilot.cli.experimental:x", "Experimental commands: precheck."),
    "profile": LazyCommand(
        "meshpilot.cli.profile:profile", "List, dump and compare install profiles (istioctl)."
    ),
    "proxy": LazyCommand(
        "meshpilot.cli.proxy:proxy", "Run an Envoy proxy with its agent (Istio's pilot-agent)."
    ),
    "proxy-config": LazyCommand(
        "meshpilot.cli.proxy_config:proxy_config",
        "Show one proxy's listeners, routes, clusters, endpoints, secrets.",
    ),
    "proxy-status": LazyCommand(
        "meshpilot.cli.proxy_status:proxy_status",
        "Show whether each proxy has what the control plane sent it.",
    ),
    "rollout": LazyCommand(
        "meshpilot.cli.rollout:rollout",
        "Restart a Deployment's pods or follow its rollout (kubectl rollout).",
    ),
    "run": LazyCommand(
        "meshpilot.cli.run:run",
        "Run the Pods and Deployments of files here as injected netns pods (kubelet's stand-in).",
    ),
    "token": LazyCommand(
        "meshpilot.cli.token:token", "Bootstrap tokens that workloads present to the CA."
    ),
    "translate": LazyCommand(
        "meshpilot.cli.translate:translate", "Print the Envoy configuration of one proxy."
    ),
}

# Commands that never read Kubernetes or Istio objects: they skip loading the GitOps kinds.
_READ_NO_OBJECTS = frozenset(
    {
        "iptables",
        "kube-inject",
        "manifest",
        "profile",
        "proxy",
        "proxy-config",
        "proxy-status",
        "token",
        "version",
    }
)


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="meshpilot")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """meshpilot: Istio-compatible service mesh and GitOps delivery engine."""
    if ctx.invoked_subcommand not in _READ_NO_OBJECTS:
        # The store and the loader know Application and AppProject.
        from meshpilot.gitops.model import register_gitops_kinds

        register_gitops_kinds()


def main() -> None:
    """Run the CLI; errors become one line on stderr and exit code 1 (2 for usage errors),
    never a traceback unless MESHPILOT_DEBUG=1."""
    try:
        cli(prog_name="meshpilot", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except MeshpilotError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: say so plainly, keep the traceback for debugging
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        click.echo(
            f"Internal error: {type(exc).__name__}: {exc}\n"
            f"This is a meshpilot bug; rerun with {DEBUG_ENV}=1 for the traceback and report it.",
            err=True,
        )
        sys.exit(70)
