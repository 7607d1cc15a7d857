"""The web UI / JSON API of a real Topology Master: reading is open, changing needs the
token `jstorm ui` prints and a same-origin request; refusals are logged with the peer."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from opstopo import get_json, keyed, ui_base, wait_for

from jstormpy import Config, LocalCluster


def post(url: str, body: dict, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.timeout(120)
def test_changes_need_the_token_and_same_origin(tmp_path):
    with LocalCluster() as cluster:
        handle = cluster.submit(keyed(tmp_path / "out", name="uiauth"),
                                Config(workers=2, checkpoint_interval_ms=60_000))
        base = ui_base(handle)
        wait_for(lambda: get_json(f"{base}/api/status")["state"] == "running", 60, "running")
        token_file = handle.run_dir / "ui.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        out = subprocess.run([sys.executable, "-m", "jstormpy.cli.main", "ui", "uiauth"],
                             capture_output=True, text=True, timeout=60,
                             check=True).stdout
        token = out.splitlines()[1].rsplit(" ", 1)[1]
        assert token == token_file.read_text()

        url = f"{base}/api/checkpoint"
        code, text = post(url, {}, {})
        assert code == 403 and "X-JStorm-Token header is required" in text
        code, text = post(url, {}, {"X-JStorm-Token": "guess"})
        assert code == 403 and "wrong" in text
        code, text = post(url, {}, {"X-JStorm-Token": token,  # a forged cross-site form
                                    "Origin": "http://evil.example"})
        assert code == 403 and "cross-origin" in text
        assert handle.last_completed_checkpoint() is None, "no refused call took effect"

        code, text = post(url, {}, {"X-JStorm-Token": token, "Origin": base})
        assert code == 200 and json.loads(text)["ok"], text
        wait_for(handle.last_completed_checkpoint, 30, "the forced checkpoint")
        code, text = post(f"{base}/api/loglevel", {"component": "tally", "level": "debug"},
                          {"X-JStorm-Token": token})
        assert code == 200 and json.loads(text)["workers"] == 2
        code, text = post(f"{base}/api/loglevel", {"component": "nope", "level": "debug"},
                          {"X-JStorm-Token": token})
        assert code == 400 and "nope" in text
        log_text = (handle.run_dir / "logs" / "master.log").read_text()
        assert "refused POST /api/checkpoint from 127.0.0.1: cross-origin" in log_text


def documented_endpoints() -> set[tuple[str, str]]:
    """(method, path) rows of docs/operations.md's endpoint table."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    table = doc[doc.index("## HTTP endpoints"):].split("\n\n")[1]
    rows = set()
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.add((cells[0], cells[1].strip("`").split("[")[0]))
    return rows


@pytest.mark.timeout(120)
def test_the_endpoint_table_in_operations_md_is_what_the_server_serves(tmp_path):
    """docs/operations.md once called the HTTP side read-only and unauthenticated while a
    write token and POST endpoints existed (issue 28 item 12)."""
    from jstormpy.master import http as ops_http

    served = {(m, p) for m, p in
              (line.split()[:2] for line in (ops_http.__doc__ or "").splitlines()
               if line.strip().startswith(("GET /", "POST /")))}
    assert documented_endpoints() == served
    with LocalCluster() as cluster:
        handle = cluster.submit(keyed(tmp_path / "out", name="uidocs"),
                                Config(workers=1, checkpoint_interval_ms=60_000))
        base = ui_base(handle)
        wait_for(lambda: get_json(f"{base}/api/status")["state"] == "running", 60, "running")
        token = (handle.run_dir / "ui.token").read_text()
        for method, path in sorted(served):
            if method == "GET":
                with urllib.request.urlopen(f"{base}{path}", timeout=10) as resp:
                    assert resp.status == 200, path
            else:
                body = {"component": "", "level": "INFO"}
                assert post(f"{base}{path}", body, {})[0] == 403, path
                code, text = post(f"{base}{path}", body, {"X-JStorm-Token": token})
                assert code == 200, (path, text)
