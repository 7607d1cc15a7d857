"""The Topology Master's HTTP side: web UI, JSON API and Prometheus ``/metrics``.

Started by ``master/__main__.py`` in a daemon thread (stdlib ``ThreadingHTTPServer``)::

    GET /               the web UI (static files from ``master/ui/``, no CDN)
    GET /metrics        Prometheus text format (``master/prom.py``)
    GET /api/status     MasterCore.status() plus the live config and recent events (and
                        ``ha``, the leader and standbys of a ``--ha`` run)
    GET /api/metrics    metrics task → component → worker → topology (+ worker processes)
    GET /api/history    the last hour at 10 s resolution (``?since=EPOCH_S``)
    GET /healthz        ``ok`` (liveness)

    POST /api/checkpoint   force a checkpoint      } need the ``X-JStorm-Token`` header
    POST /api/loglevel     {"component", "level"}  } (``jstorm ui NAME``; master/http_auth.py)

Reading needs no token; changing needs the run's UI token and a same-origin request.
It binds ``Config.host`` (127.0.0.1 by default).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from jstormpy.api.errors import JStormError
from jstormpy.ha_view import HaView
from jstormpy.master import ops as live_ops
from jstormpy.master.history import DEFAULT_INTERVAL_S, MetricsHistory
from jstormpy.master.http_auth import create_ui_token, refuse_change
from jstormpy.master.metrics import metrics_reply
from jstormpy.master.ops import live_log_levels
from jstormpy.master.prom import registry_for

log = logging.getLogger("jstormpy.master.http")

HISTORY_INTERVAL_ENV = "JSTORM_HISTORY_INTERVAL_S"
_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/index.html": ("index.html", "text/html; charset=utf-8"),
           "/app.js": ("app.js", "application/javascript; charset=utf-8"),
           "/style.css": ("style.css", "text/css; charset=utf-8")}


def _static(name: str) -> bytes:
    return resources.files("jstormpy.master").joinpath("ui", name).read_bytes()


def api_status(core: Any, history: MetricsHistory | None,
               run_dir: Path | None = None) -> dict[str, Any]:
    """Status for the UI: MasterCore.status() + live config + recent events, and for a
    ``--ha`` run what its launcher last saw in ZooKeeper (``ha``: leader, standbys, the
    recorded run; jstormpy/ha_view.py)."""
    status = core.status()
    view = HaView.read(run_dir) if run_dir is not None else None
    if view is not None:
        status["ha"] = view.to_dict()
    with core.lock:
        cfg = core.config
        status["config"] = {k: getattr(cfg, k) for k in (
            "workers", "checkpoint_interval_ms", "checkpoint_timeout_ms", "batch_size",
            "batch_linger_ms", "queue_capacity", "backpressure_high_watermark",
            "backpressure_low_watermark", "log_level")}
        status["config"].update({f"log_level[{c}]": lvl for c, lvl in  # jstorm loglevel
                                 live_log_levels(core).items() if c})
        status["inflight_checkpoints"] = sorted(core.checkpoints.inflight)
    if history is not None:
        with history.lock:
            status["events"] = list(history.events)[-50:]
    return status


def api_metrics(core: Any, component: str = "") -> dict[str, Any]:
    """What the gRPC Metrics call returns (built by the same function)."""
    return metrics_reply(core, component)


class _Handler(BaseHTTPRequestHandler):
    server: OpsHttpServer  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any) -> None:
        self._send(200, json.dumps(data, default=str).encode(), "application/json")

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        ops = self.server
        try:
            if url.path in _STATIC:
                name, ctype = _STATIC[url.path]
                self._send(200, _static(name), ctype)
            elif url.path == "/metrics":
                self._send(200, generate_latest(ops.registry), CONTENT_TYPE_LATEST)
            elif url.path == "/api/status":
                self._json(api_status(ops.core, ops.history, ops.run_dir))
            elif url.path == "/api/metrics":
                self._json(api_metrics(ops.core, query.get("component", [""])[0]))
            elif url.path == "/api/history":
                since = float(query.get("since", ["0"])[0] or 0)
                self._json(ops.history.to_dict(since))
            elif url.path == "/healthz":
                self._send(200, b"ok\n", "text/plain")
            else:
                self._send(404, b"not found\n", "text/plain")
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            log.exception("GET %s failed", self.path)
            self._send(500, f"error: {exc}\n".encode(), "text/plain")


    # -- state-changing requests (security: master/http_auth.py) ---------------------------
    def do_POST(self) -> None:  # noqa: N802
        ops = self.server
        host, port = ops.server_address[:2]
        own = {f"http://{host!s}:{port}", f"http://localhost:{port}"}
        problem = refuse_change(ops.token, self.headers, own)
        if problem is not None:
            log.warning("refused POST %s from %s: %s", self.path, self.address_string(),
                        problem)
            self._send(403, f"forbidden: {problem}\n".encode(), "text/plain")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > 64 << 10:
                self._send(413, b"request body too large\n", "text/plain")
                return
            body = json.loads(self.rfile.read(length) or b"{}")
            path = urlsplit(self.path).path
            if path == "/api/checkpoint":
                cid = ops.core.trigger_checkpoint(force=True)
                self._json({"ok": cid is not None, "checkpoint_id": cid})
            elif path == "/api/loglevel":
                n = live_ops.set_log_level(ops.core, str(body.get("component", "")),
                                           str(body.get("level", "")))
                self._json({"ok": True, "workers": n})
            else:
                self._send(404, b"not found\n", "text/plain")
        except (ValueError, JStormError) as exc:
            self._send(400, f"error: {exc}\n".encode(), "text/plain")


class OpsHttpServer(ThreadingHTTPServer):
    """HTTP server bound to one MasterCore."""

    daemon_threads = True

    def __init__(self, core: Any, host: str, port: int, history: MetricsHistory) -> None:
        super().__init__((host, port), _Handler)
        self.core = core
        self.history = history
        self.registry = registry_for(core)
        self.token = ""  # the UI token for state-changing requests (set by start_ops_server)
        self.run_dir: Path | None = None  # the run directory (set by start_ops_server)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where a browser opens the UI."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self) -> None:
        """Serve in a daemon thread and start the history sampler."""
        self.history.start()
        self.thread = threading.Thread(target=self.serve_forever, name="ops-http",
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self.history.stop()
        self.shutdown()
        self.server_close()


def start_ops_server(core: Any, host: str, port: int, run_dir: Path | None) -> OpsHttpServer:
    """Start the UI/metrics server; writes its port to ``run_dir/ui.port``."""
    interval = float(os.environ.get(HISTORY_INTERVAL_ENV, DEFAULT_INTERVAL_S))
    try:
        server = OpsHttpServer(core, host, port, MetricsHistory(core, interval_s=interval))
    except OSError as exc:
        if port == 0:
            raise
        log.warning("web UI cannot bind %s:%d (%s); using a free port instead", host, port, exc)
        server = OpsHttpServer(core, host, 0, MetricsHistory(core, interval_s=interval))
    server.token = create_ui_token(run_dir)
    server.run_dir = run_dir
    server.start()
    if run_dir is not None:
        tmp = run_dir / "ui.port.tmp"
        tmp.write_text(str(server.server_address[1]))
        tmp.replace(run_dir / "ui.port")
    log.info("web UI of %s at %s (Prometheus: %smetrics)", core.name, server.url, server.url)
    return server
