"""Who may change things through the Topology Master's HTTP API (docs/security.md).

Reading (the UI, ``/api/status``, ``/metrics``) needs nothing: the server binds
``Config.host`` (127.0.0.1 by default). Every state-changing request (``POST /api/...``)
must carry the run's UI token, printed by ``jstorm ui NAME``, in the ``X-JStorm-Token``
header. That also stops cross-site request forgery: a page on another site cannot set a
custom header without a CORS pre-flight, which this server never grants, and a request
whose ``Origin`` is not this server is refused as well.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Any, Protocol

TOKEN_HEADER = "X-JStorm-Token"
TOKEN_FILE = "ui.token"


def create_ui_token(run_dir: Path | None) -> str:
    """A fresh token for this TM, written to ``run_dir/ui.token`` (mode 0600)."""
    token = secrets.token_urlsafe(32)
    if run_dir is not None:
        path = run_dir / TOKEN_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token)
        os.chmod(path, 0o600)
    return token


def read_ui_token(run_dir: str | os.PathLike[str]) -> str:
    """The UI token of a run ("" if the TM has not written one)."""
    try:
        return (Path(run_dir) / TOKEN_FILE).read_text().strip()
    except OSError:
        return ""


class Headers(Protocol):
    """A request's headers (``BaseHTTPRequestHandler.headers``): looked up by name."""

    def get(self, name: str) -> Any: ...


def refuse_change(token: str, headers: Headers, own_origins: set[str]) -> str | None:
    """None if a state-changing request with these headers may proceed, else why not."""
    get = headers.get
    origin = get("Origin")
    if origin is not None and origin not in own_origins:
        return f"cross-origin request from {origin!r} refused"
    given = get(TOKEN_HEADER) or ""
    if not given:
        return f"the {TOKEN_HEADER} header is required (see `jstorm ui NAME`)"
    if not hmac.compare_digest(given.encode(), token.encode()):
        return f"wrong {TOKEN_HEADER}"
    return None
