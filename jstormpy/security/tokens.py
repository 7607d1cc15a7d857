"""Per-topology secret: per-request HMAC tokens for gRPC calls to the Topology Master.

Every call carries metadata ``x-jstorm-auth: <unix-ms>:<nonce>:<hex hmac>`` where the HMAC
covers the time stamp, the nonce, the method name and the SHA-256 of the serialized
request. The TM refuses a token whose HMAC does not verify for *this* method and body,
whose clock skew exceeds the window, or whose nonce it has already seen (replay cache):
a token seen on the wire cannot be replayed, nor moved to another call. With TLS on
(the default) calls also travel over mutual TLS and the peer's certificate decides what
it may call (``jstormpy.security.tls``, docs/security.md).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from typing import Any

AUTH_HEADER = "x-jstorm-auth"
SECRET_ENV = "JSTORM_SECRET"
MAX_SKEW_MS = 5 * 60 * 1000
#: Nonces remembered at most (a flood of *valid* tokens needs the secret).
REPLAY_CACHE_SIZE = 200_000


def new_secret() -> str:
    """A fresh random per-topology secret (hex)."""
    return secrets.token_hex(32)


def secret_from_env() -> bytes:
    """The secret handed to a process through the environment."""
    value = os.environ.get(SECRET_ENV, "")
    if not value:
        raise SystemExit(f"{SECRET_ENV} is not set: the per-topology secret is required")
    return value.encode()


def method_name(method: str) -> str:
    """``/jstorm.TopologyMaster/Kill`` -> ``Kill`` (what the token is bound to)."""
    return method.rsplit("/", 1)[-1]


def body_digest(request: Any) -> str:
    """SHA-256 (hex) of a request message's deterministic serialization (b"" for None)."""
    data = b"" if request is None else request.SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()


def _mac(secret: bytes, stamp: str, nonce: str, method: str, digest: str) -> str:
    text = f"{stamp}:{nonce}:{method_name(method)}:{digest}".encode()
    return hmac.new(secret, text, hashlib.sha256).hexdigest()


def make_token(secret: bytes, method: str = "", request: Any = None) -> str:
    """A fresh token for one call of ``method`` with ``request``."""
    stamp = str(int(time.time() * 1000))
    nonce = secrets.token_hex(16)
    return f"{stamp}:{nonce}:{_mac(secret, stamp, nonce, method, body_digest(request))}"


class ReplayCache:
    """Nonces seen within the skew window; a second use of one is a replay."""

    def __init__(self, window_ms: int = MAX_SKEW_MS, size: int = REPLAY_CACHE_SIZE) -> None:
        self.window_s = 2 * window_ms / 1000.0  # a token is valid +- the window
        self.size = size
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def first_use(self, nonce: str) -> bool:
        """Record ``nonce``; False if it was seen before (or the cache is full)."""
        now = time.monotonic()
        with self._lock:
            if nonce in self._seen:
                return False
            if len(self._seen) >= self.size:
                self._seen = {n: t for n, t in self._seen.items() if t > now}
                if len(self._seen) >= self.size:
                    return False
            self._seen[nonce] = now + self.window_s
            return True


def verify_token(secret: bytes, token: str, method: str = "", request: Any = None,
                 replay: ReplayCache | None = None) -> str | None:
    """None if ``token`` is valid for this call, else the reason it is not."""
    try:
        stamp, nonce, mac = token.split(":")
        skew = abs(int(time.time() * 1000) - int(stamp))
    except ValueError:
        return "malformed token"
    if skew > MAX_SKEW_MS:
        return "token expired"
    good = _mac(secret, stamp, nonce, method, body_digest(request))
    if not hmac.compare_digest(good, mac):
        return "bad signature (wrong secret, or a token made for another call)"
    if replay is not None and not replay.first_use(nonce):
        return "replayed token"
    return None


def auth_metadata(secret: bytes, method: str = "",
                  request: Any = None) -> tuple[tuple[str, str], ...]:
    """gRPC call metadata carrying a fresh token for ``method`` with ``request``."""
    return ((AUTH_HEADER, make_token(secret, method, request)),)
