"""The web UI in a real headless Chromium (Debian's package, driven by Playwright).

Asserts what a person would look for: the graph shows the components, rates move, a
checkpoint appears in the history, and a SIGKILLed worker shows as failed, then recovered.
"""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from opstopo import keyed, ui_base, wait_for

from jstormpy import Config, LocalCluster
from jstormpy.ha_view import HaView

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--disable-dev-shm-usage"]


@pytest.fixture
def page(tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; "
                    "scripts/setup.sh does it)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install -e .[test])")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=ARGS, viewport={"width": 1400, "height": 1000})
        try:
            yield browser.new_page()
        finally:
            browser.close()


def _text(page, selector: str) -> str:
    return page.eval_on_selector(selector, "e => e.textContent")


def test_ui_graph_rates_checkpoints_and_worker_recovery(page, tmp_path):
    with LocalCluster() as cluster:
        handle = cluster.submit(keyed(tmp_path / "out", name="uidemo"),
                                Config(workers=2, checkpoint_interval_ms=500))
        base = ui_base(handle)
        page.goto(f"{base}/")

        # the graph renders the right components, with edges from the inputs
        page.wait_for_selector('#graph .node[data-component="sink"]', timeout=30_000)
        names = page.eval_on_selector_all("#graph .node", "ns => ns.map(n => n.dataset.component)")
        assert sorted(names) == ["events", "sink", "tally"]
        edges = page.eval_on_selector_all(
            "#graph .edge", "es => es.map(e => e.dataset.from + '>' + e.dataset.to)")
        assert sorted(edges) == ["events>tally", "tally>sink"]
        assert _text(page, "#topology-name") == "uidemo"

        # the HA header: hidden without --ha; shown from the view a --ha leader's launcher
        # writes into the run directory (tests/ha reads it from real launchers over HTTP)
        assert page.is_hidden("#ha")
        HaView("zk://10.213.0.5:2181/jstorm", "host-a pid=11", ("host-b pid=22",),
               {"state": "running", "epoch": 1}).write(handle.run_dir)
        page.wait_for_selector("#ha:not([hidden])", timeout=30_000)
        assert (_text(page, "#ha-leader"), _text(page, "#ha-standby"),
                _text(page, "#ha-epoch")) == ("host-a pid=11", "host-b pid=22", "1")

        # rates: non-zero and moving between two reads
        def rate(component):
            value = page.get_attribute(f'#graph .node[data-component="{component}"]',
                                       "data-rate")
            return float(value) if value else 0.0

        first = wait_for(lambda: rate("tally") > 0 and rate("tally"), 30, "a tally rate")
        executed = int(page.get_attribute('#tasks tr[data-task="3"]', "data-executed"))
        wait_for(lambda: rate("tally") != first, 30, "the tally rate to change")
        wait_for(lambda: int(page.get_attribute('#tasks tr[data-task="3"]', "data-executed"))
                 > executed, 30, "task 3's executed count to grow")
        assert "/s" in _text(page, '#graph .node[data-component="tally"] text.rate')
        # header: records in/s at the spouts and out/s at the sinks (one JS tick: one poll)
        rates = wait_for(lambda: (r := page.evaluate("""() => {
            const v = (sel, attr) => Number(document.querySelector(sel).getAttribute(attr));
            return {in: v("#rate-in", "data-rate"), out: v("#rate-out", "data-rate"),
                    events: v('#graph .node[data-component="events"]', "data-rate"),
                    sink: v('#graph .node[data-component="sink"]', "data-rate")};
        }""")) and r["in"] > 0 and r["out"] > 0 and r, 30, "in/out rates in the header")
        assert rates["in"] == rates["events"] and rates["out"] == rates["sink"], rates
        assert _text(page, "#rate-in").endswith("/s")
        fill = page.get_attribute('#graph .node[data-component="tally"] rect', "fill")
        assert fill.startswith("rgb(")

        # a completed checkpoint appears in the history table
        page.wait_for_selector('#checkpoints tr[data-status="completed"]', timeout=30_000)
        row = _text(page, '#checkpoints tr[data-status="completed"]')
        assert "completed" in row and "ms" in row

        # workers table shows pids; SIGKILL one: it shows as failed, then recovered
        worker = handle.workers()[1]
        assert worker.pid is not None
        page.wait_for_selector(f'#workers tr[data-worker="1"][data-pid="{worker.pid}"]',
                               timeout=30_000)
        gen_before = int(_text(page, "#generation"))
        os.kill(worker.pid, signal.SIGKILL)
        page.wait_for_selector(
            f'#events li[data-kind="worker_failed"][data-worker="1"][data-pid="{worker.pid}"]',
            timeout=30_000)
        page.wait_for_selector('#events li[data-kind="worker_recovered"][data-worker="1"]',
                               timeout=60_000)
        page.wait_for_selector('#workers tr[data-worker="1"][data-alive="true"]'
                               f':not([data-pid="{worker.pid}"])', timeout=60_000)
        wait_for(lambda: int(_text(page, "#generation")) > gen_before, 60, "a new generation")
        page.wait_for_selector(f'#recoveries li[data-generation="{gen_before + 1}"]',
                               timeout=60_000)
        assert "lost" in _text(page, "#recoveries")
        wait_for(lambda: _text(page, "#state") == "running", 60, "running again")
        page.screenshot(path=str(tmp_path / "ui.png"), full_page=True)
        shot = os.environ.get("JSTORM_UI_SCREENSHOT")
        if shot:
            shutil.copy(tmp_path / "ui.png", shot)
