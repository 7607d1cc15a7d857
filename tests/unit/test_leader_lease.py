"""The leader lease (jstormpy/leader_lease.py) and the --ha URL and run record
(deploy/ha.py): the pure parts of the standby Topology Master; tests/ha runs it whole."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from jstormpy.api.errors import ConfigError
from jstormpy.deploy.ha import HaUrl, RunRecord, RunState
from jstormpy.leader_lease import LEASE_FRACTION, LeaderLease


def test_a_renewed_lease_lasts_a_share_of_the_session_from_the_send_time(
        tmp_path: Path) -> None:
    lease = LeaderLease(tmp_path / "leader.lease")
    sent = time.monotonic()
    lease.renew(sent_at=sent, session_timeout_s=10.0, epoch=3)
    state = lease.read()
    assert state is not None and state.epoch == 3
    assert state.until == pytest.approx(sent + 10.0 * LEASE_FRACTION)
    assert lease.valid()


def test_a_lease_renewed_too_long_ago_is_expired(tmp_path: Path) -> None:
    lease = LeaderLease(tmp_path / "leader.lease")
    lease.renew(sent_at=time.monotonic() - 7.0, session_timeout_s=10.0)  # 6 s lease
    assert not lease.valid()
    assert lease.remaining_s() < 0


@pytest.mark.parametrize("content", [None, "", "{", '{"until": "x"}', "[]"])
def test_no_lease_or_an_unreadable_one_counts_as_expired(tmp_path: Path,
                                                        content: str | None) -> None:
    path = tmp_path / "leader.lease"
    if content is not None:
        path.write_text(content)
    assert not LeaderLease(path).valid()


def test_a_revoked_lease_is_expired(tmp_path: Path) -> None:
    lease = LeaderLease(tmp_path / "leader.lease")
    lease.renew(sent_at=time.monotonic(), session_timeout_s=10.0)
    lease.revoke()
    assert not lease.valid()
    lease.revoke()  # twice: no error


def test_ha_url() -> None:
    url = HaUrl.parse("zk://10.0.0.5:2181,10.0.0.6:2181/jstorm/prod/")
    assert url.hosts == "10.0.0.5:2181,10.0.0.6:2181"
    assert url.topology_path("wc") == "/jstorm/prod/wc"
    assert str(url) == "zk://10.0.0.5:2181,10.0.0.6:2181/jstorm/prod"
    for bad in ("http://h:2181/x", "zk:///x", "zk://h:2181", "zk://h:2181/"):
        with pytest.raises(ConfigError, match="--ha"):
            HaUrl.parse(bad)


def test_run_record_round_trip_and_garbage() -> None:
    record = RunRecord(RunState.RUNNING, "host-a pid=1", "abc", 2, 5, 17, 1.5)
    assert RunRecord.from_json(record.to_json()) == record
    assert not record.state.final and RunState.DRAINED.final
    assert RunRecord.from_json(None) is None
    assert RunRecord.from_json(b"not json") is None
    assert RunRecord.from_json(b'{"state": "dancing", "leader": "x"}') is None


def test_the_ha_view_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    from jstormpy.ha_view import HA_FILE, HaView

    assert HaView.read(tmp_path) is None  # not a --ha run
    record = RunRecord(RunState.RUNNING, "host-a pid=1", "abc", 2, 5, 17, 1.5)
    view = HaView("zk://10.0.0.5:2181/jstorm", "host-a pid=1", ("host-b pid=2",),
                  record.status_dict())
    view.write(tmp_path)
    back = HaView.read(tmp_path)
    assert back == view
    assert back is not None and back.to_dict()["run"]["epoch"] == 2
    assert back.to_dict()["standby"] == ["host-b pid=2"]
    (tmp_path / HA_FILE).write_text("{")  # torn or foreign: no view rather than an error
    assert HaView.read(tmp_path) is None
