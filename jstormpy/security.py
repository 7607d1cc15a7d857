"""Per-topology secret: HMAC tokens for gRPC calls to the Topology Master.

Every call carries metadata ``x-jstorm-auth: <unix-ms>:<nonce>:<hex hmac>``; the TM
refuses calls whose HMAC does not verify or whose clock skew exceeds the window.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time

AUTH_HEADER = "x-jstorm-auth"
SECRET_ENV = "JSTORM_SECRET"
MAX_SKEW_MS = 5 * 60 * 1000


def new_secret() -> str:
    """A fresh random per-topology secret (hex)."""
    return secrets.token_hex(32)


def secret_from_env() -> bytes:
    """The secret handed to a process through the environment."""
    value = os.environ.get(SECRET_ENV, "")
    if not value:
        raise SystemExit(f"{SECRET_ENV} is not set: the per-topology secret is required")
    return value.encode()


def make_token(secret: bytes) -> str:
    """A fresh token for one call."""
    stamp = str(int(time.time() * 1000))
    nonce = secrets.token_hex(8)
    mac = hmac.new(secret, f"{stamp}:{nonce}".encode(), hashlib.sha256).hexdigest()
    return f"{stamp}:{nonce}:{mac}"


def verify_token(secret: bytes, token: str) -> str | None:
    """None if ``token`` is valid, else the reason it is not."""
    try:
        stamp, nonce, mac = token.split(":")
        skew = abs(int(time.time() * 1000) - int(stamp))
    except ValueError:
        return "malformed token"
    if skew > MAX_SKEW_MS:
        return "token expired"
    good = hmac.new(secret, f"{stamp}:{nonce}".encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(good, mac):
        return "bad signature"
    return None


def auth_metadata(secret: bytes) -> tuple[tuple[str, str], ...]:
    """gRPC call metadata carrying a fresh token."""
    return ((AUTH_HEADER, make_token(secret)),)
