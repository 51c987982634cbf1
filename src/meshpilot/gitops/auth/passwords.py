"""bcrypt password hashes (Argo CD's `admin.password` format) and generated passwords."""

from __future__ import annotations

import secrets
import string

import bcrypt

__all__ = ["check_password", "generate_password", "hash_password"]

_ALPHABET = string.ascii_letters + string.digits
# A hash to check against when the account does not exist, so that an unknown user takes as
# long to refuse as a wrong password (no probing of account names by timing).
_DUMMY = bcrypt.hashpw(b"no such account", bcrypt.gensalt(rounds=10))


def hash_password(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()


def check_password(password: str, hashed: str) -> bool:
    """True when `password` matches the bcrypt `hashed`; an empty hash matches nothing."""
    try:
        ok = bcrypt.checkpw(password.encode(), (hashed or "").encode() or _DUMMY)
    except ValueError:  # not a bcrypt hash
        bcrypt.checkpw(password.encode(), _DUMMY)
        return False
    return ok and bool(hashed)


def generate_password(length: int = 16) -> str:
    """Argo CD's initial admin password is 16 random characters, letters and digits."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))
