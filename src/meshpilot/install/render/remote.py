"""Component IstiodRemote: a cluster whose istiod runs elsewhere gets only the injector
webhook, pointing at `values.istiodRemote.injectionURL` or the remote pilot address."""

from __future__ import annotations

from meshpilot.install.render.context import Context, K8sObject
from meshpilot.install.render.webhooks import injector_webhook
from meshpilot.install.spec import IstioOperatorError
from meshpilot.install.values import IstiodRemoteValues

__all__ = ["COMPONENT", "remote_objects"]

COMPONENT = "IstiodRemote"


def remote_objects(ctx: Context) -> list[K8sObject]:
    remote = ctx.values.istiod_remote or IstiodRemoteValues()
    address = ctx.global_values.remote_pilot_address
    if remote.injection_url:
        url = remote.injection_url
    elif address:
        url = f"https://{address}:15017{remote.injection_path or '/inject'}"
    else:
        raise IstioOperatorError(
            "components.istiodRemote is enabled but neither values.istiodRemote.injectionURL "
            "nor values.global.remotePilotAddress says where the external istiod is"
        )
    return [injector_webhook(ctx, COMPONENT, {"url": url})]
