"""Login and API tokens of a running `gitops serve` (argocd login / account / proj role):

    meshpilot gitops login --server URL [--username admin] [--password P]   (prompts if absent)
    meshpilot gitops logout --server URL
    meshpilot gitops account list|get [--account NAME] --server URL
    meshpilot gitops account update-password [--account NAME] [--current-password P]
                                             [--new-password P] --server URL
    meshpilot gitops account generate-token [--account NAME] [--expires-in 0] [--id ID]
    meshpilot gitops account delete-token [--account NAME] ID
    meshpilot gitops proj role create-token PROJECT ROLE [--expires-in 0] [--id ID]
    meshpilot gitops proj role delete-token PROJECT ROLE ID

`login` keeps the session token in the CLI's login file (cli/gitops_config.py, 0600); the
other verbs use it, or --auth-token. `generate-token` and `create-token` print the new token
(their only output on stdout, for scripts); keep it secret.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import click

from meshpilot.cli.gitops_config import auth_options, forget_token, save_token, token_for
from meshpilot.cli.live import user_errors
from meshpilot.config.duration import parse_duration
from meshpilot.gitops.server.client import ApiClient, ApiError

__all__ = ["register_auth"]

F = TypeVar("F", bound=Callable[..., Any])


def _server(func: F) -> F:
    func = auth_options(func)
    return click.option(
        "--server", "server_url", metavar="URL", required=True,
        help="The running `meshpilot gitops serve` (e.g. http://127.0.0.1:8080).",
    )(func)  # fmt: skip


def _client(url: str) -> ApiClient:
    base = ApiClient(url).base
    return ApiClient(base, token_for(base))


def _seconds(value: str) -> int:
    if value.strip() in ("", "0"):
        return 0
    try:
        return int(parse_duration(value) / 1e9) if not value.isdigit() else int(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--expires-in") from None


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _when(epoch: object) -> str:
    """An RFC 3339 time from a JWT's iat/exp; `never` for none."""
    if not isinstance(epoch, int):
        return "never"
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat().replace("+00:00", "Z")


def _me(client: ApiClient, account: str | None) -> str:
    return account or str(client.call("GET", "/api/v1/session/userinfo").get("username") or "")


_expires = click.option(
    "--expires-in", default="0", show_default=True,
    help="Lifetime (e.g. 24h, 90d as 2160h, seconds); 0: the token never expires.",
)  # fmt: skip
_token_id = click.option("--id", "token_id", default="", help="Token id (default: a UUID).")


@click.command("login")
@_server
@click.option("--username", default="admin", show_default=True)
@click.option("--password", help="Prompted for when absent (not echoed).")
@user_errors
def login(server_url: str, username: str, password: str | None) -> None:
    """Log in to a gitops server and keep the session token (argocd login)."""
    client = ApiClient(server_url)
    if password is None:
        password = click.prompt("Password", hide_input=True)
    answer = client.call("POST", "/api/v1/session", {"username": username, "password": password})
    token = str(answer.get("token") or "")
    if not token:
        raise click.ClickException("the server answered the login without a token")
    path = save_token(client.base, username, token)
    click.echo(f"'{username}' logged in successfully; session saved in {path}")


@click.command("logout")
@_server
@user_errors
def logout(server_url: str) -> None:
    """End the session on the server and forget its token (argocd logout)."""
    client = _client(server_url)
    try:
        client.call("DELETE", "/api/v1/session")
    except ApiError as exc:
        if exc.status != 401:  # an expired session: nothing left to end
            raise
    path = forget_token(client.base)
    click.echo(f"logged out from {client.base}" + (f" ({path} updated)" if path else ""))


@click.group("account")
def account() -> None:
    """Local accounts of a gitops server (argocd account)."""


@account.command("list")
@_server
@user_errors
def list_accounts(server_url: str) -> None:
    items = _client(server_url).call("GET", "/api/v1/account").get("items") or []
    click.echo(f"{'NAME':<20}{'ENABLED':<9}CAPABILITIES")
    for item in items:
        caps = ", ".join(item.get("capabilities") or [])
        click.echo(f"{item.get('name', ''):<20}{str(item.get('enabled')).lower():<9}{caps}")


@account.command("get")
@click.option("--account", "account_name", metavar="NAME", help="Default: the logged-in one.")
@_server
@user_errors
def get_account(account_name: str | None, server_url: str) -> None:
    client = _client(server_url)
    name = _me(client, account_name)
    answer = client.call("GET", f"/api/v1/account/{_q(name)}")
    click.echo(f"{'Name:':<14}{answer.get('name')}")
    click.echo(f"{'Enabled:':<14}{str(answer.get('enabled')).lower()}")
    click.echo(f"{'Capabilities:':<14}{', '.join(answer.get('capabilities') or [])}")
    click.echo(f"\nTokens:\n{'ID':<38}{'ISSUED AT':<22}EXPIRES AT")
    for token in answer.get("tokens") or []:
        issued, expires = _when(token.get("iat")), _when(token.get("exp"))
        click.echo(f"{token.get('id', ''):<38}{issued:<22}{expires}")


@account.command("update-password")
@click.option("--account", "account_name", metavar="NAME", help="Default: the logged-in one.")
@click.option("--current-password", help="Your own password (prompted for when absent).")
@click.option("--new-password", help="Prompted for (twice) when absent.")
@_server
@user_errors
def update_password(
    account_name: str | None, current_password: str | None, new_password: str | None,
    server_url: str,
) -> None:  # fmt: skip
    client = _client(server_url)
    me = _me(client, None)
    name = account_name or me
    if current_password is None:
        current_password = click.prompt("Current password", hide_input=True)
    if new_password is None:
        new_password = click.prompt("New password", hide_input=True, confirmation_prompt=True)
    body = {"name": name, "currentPassword": current_password, "newPassword": new_password}
    client.call("PUT", "/api/v1/account/password", body)
    click.echo(f"Password updated for {name}; its sessions have ended")
    if name == me:  # ours too: log in again with the new password, as argocd does
        answer = client.call("POST", "/api/v1/session", {"username": me, "password": new_password})
        save_token(client.base, me, str(answer.get("token") or ""))
        click.echo(f"'{me}' logged in again")


@account.command("generate-token")
@click.option("--account", "account_name", metavar="NAME", help="Default: the logged-in one.")
@_expires
@_token_id
@_server
@user_errors
def generate_token(
    account_name: str | None, expires_in: str, token_id: str, server_url: str
) -> None:
    client = _client(server_url)
    name = _me(client, account_name)
    body = {"expiresIn": _seconds(expires_in), "id": token_id}
    click.echo(client.call("POST", f"/api/v1/account/{_q(name)}/token", body).get("token"))


@account.command("delete-token")
@click.argument("token_id", metavar="ID")
@click.option("--account", "account_name", metavar="NAME", help="Default: the logged-in one.")
@_server
@user_errors
def delete_token(token_id: str, account_name: str | None, server_url: str) -> None:
    client = _client(server_url)
    name = _me(client, account_name)
    client.call("DELETE", f"/api/v1/account/{_q(name)}/token/{_q(token_id)}")
    click.echo(f"token {token_id} of {name} deleted: it is refused from now on")


@click.group("proj")
def proj() -> None:
    """AppProjects on a gitops server (argocd proj)."""


@proj.group("role")
def role() -> None:
    """Project roles and their tokens."""


@role.command("create-token")
@click.argument("project")
@click.argument("role_name", metavar="ROLE")
@_expires
@_token_id
@_server
@user_errors
def create_token(
    project: str, role_name: str, expires_in: str, token_id: str, server_url: str
) -> None:
    """A token acting as proj:PROJECT:ROLE, printed once (recorded by id in the project)."""
    client = _client(server_url)
    body = {"expiresIn": _seconds(expires_in), "id": token_id}
    path = f"/api/v1/projects/{_q(project)}/roles/{_q(role_name)}/token"
    answer = client.call("POST", path, body)
    click.echo(f"Create token succeeded for proj:{project}:{role_name}.", err=True)
    click.echo(f"  ID: {answer.get('id')}\n  Issued At: {_when(answer.get('iat'))}", err=True)
    click.echo(f"  Expires At: {_when(answer.get('exp'))}", err=True)
    click.echo(answer.get("token"))


@role.command("delete-token")
@click.argument("project")
@click.argument("role_name", metavar="ROLE")
@click.argument("token_id", metavar="ID")
@_server
@user_errors
def delete_role_token(project: str, role_name: str, token_id: str, server_url: str) -> None:
    path = f"/api/v1/projects/{_q(project)}/roles/{_q(role_name)}/token/{_q(token_id)}"
    _client(server_url).call("DELETE", path)
    click.echo(f"token {token_id} of proj:{project}:{role_name} deleted")


def register_auth(group: click.Group) -> None:
    for command in (login, logout, account, proj):
        group.add_command(command)
