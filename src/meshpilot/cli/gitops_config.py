"""The CLI's record of `meshpilot gitops login`: a YAML file, 0600 in a 0700 directory
(default ~/.config/meshpilot/gitops.yaml, else --config FILE or $MESHPILOT_GITOPS_CONFIG):

    servers:
      http://127.0.0.1:8080: {username: admin, token: <session token>}

Remote verbs (`--server URL`) send the token of their server; `--auth-token` or
$MESHPILOT_AUTH_TOKEN (an API token, for automation) take precedence. A token is a secret:
it is never printed except by the command that was asked to make one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.security.files import write_private
from meshpilot.settings import default_gitops_config

__all__ = [
    "AUTH_TOKEN_ENV",
    "auth_options",
    "forget_token",
    "given_token",
    "load_servers",
    "save_token",
    "token_for",
]

F = TypeVar("F", bound=Callable[..., Any])
AUTH_TOKEN_ENV = "MESHPILOT_AUTH_TOKEN"


def _remember(name: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value:
            ctx.meta[f"meshpilot.{name}"] = value
        return value

    return callback


def auth_options(func: F) -> F:
    """`--auth-token` and `--config`, kept in the click context for client_for()."""
    func = click.option(
        "--config",
        metavar="FILE",
        expose_value=False,
        callback=_remember("config"),
        help="The CLI's login file.  [default: $MESHPILOT_GITOPS_CONFIG, else "
        "~/.config/meshpilot/gitops.yaml]",
    )(func)
    return click.option(
        "--auth-token",
        metavar="TOKEN",
        expose_value=False,
        callback=_remember("auth_token"),
        help=f"An API token for --server (default: ${AUTH_TOKEN_ENV}, else the one of "
        "`meshpilot gitops login`).",
    )(func)


def _path() -> Path:
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get("meshpilot.config") if ctx is not None else None
    return Path(chosen or default_gitops_config())


def given_token() -> str | None:
    ctx = click.get_current_context(silent=True)
    chosen = ctx.meta.get("meshpilot.auth_token") if ctx is not None else None
    return str(chosen) if chosen else os.environ.get(AUTH_TOKEN_ENV) or None


def load_servers() -> dict[str, dict[str, str]]:
    path = _path()
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), str(path)) or {}
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, YAMLInputError) as exc:
        raise click.ClickException(f"{path}: cannot read the login file: {exc}") from None
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return {}
    return {str(k): v for k, v in servers.items() if isinstance(v, dict)}


def _save(servers: dict[str, dict[str, str]]) -> Path:
    path = _path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # never chmod a shared dir
    write_private(path, yaml.safe_dump({"servers": servers}, sort_keys=True).encode())
    return path


def save_token(server: str, username: str, token: str) -> Path:
    servers = load_servers()
    servers[server] = {"username": username, "token": token}
    return _save(servers)


def forget_token(server: str) -> Path | None:
    servers = load_servers()
    if servers.pop(server, None) is None:
        return None
    return _save(servers)


def token_for(server: str) -> str | None:
    """--auth-token / $MESHPILOT_AUTH_TOKEN, else the login file's token of `server`."""
    token = given_token()
    if token:
        return token
    entry = load_servers().get(server) or {}
    value = entry.get("token")
    return str(value) if value else None
