"""Authentication of the GitOps API, as Argo CD's argocd-server does it: local accounts from
argocd-cm with bcrypt passwords in argocd-secret, HS256 session and API tokens signed by a
key of the server's private state directory, project role tokens, optional anonymous access.

    jwt.py            sign and verify tokens
    accounts.py       accounts and their records, read from the store
    passwords.py      bcrypt
    state.py          the server's private files (key, initial admin password, logouts)
    throttle.py       failed logins per account name
    records.py        writes of passwords and token records into the store
    authenticator.py  who is calling; logins and tokens
"""

from meshpilot.gitops.auth.accounts import ANONYMOUS, Account, AuthConfig, TokenRecord, auth_config
from meshpilot.gitops.auth.authenticator import Authenticator, Subject
from meshpilot.gitops.auth.jwt import Claims, Unauthenticated, sign, verify
from meshpilot.gitops.auth.state import ServerState

__all__ = [
    "ANONYMOUS",
    "Account",
    "AuthConfig",
    "Authenticator",
    "Claims",
    "ServerState",
    "Subject",
    "TokenRecord",
    "Unauthenticated",
    "auth_config",
    "sign",
    "verify",
]
