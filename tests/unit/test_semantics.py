"""The exactly-once checker detects loss, duplication, reordering and strays."""

from __future__ import annotations

import pytest

from jstormpy.api.errors import SemanticsError
from jstormpy.testing.semantics import SemanticsReport, check_sequences


def recs(*pairs: tuple[str, int]) -> list[dict[str, object]]:
    return [{"key": k, "seq": s, "value": 0} for k, s in pairs]


def test_exact_output_is_ok() -> None:
    report = check_sequences(recs(("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)),
                             "key", "seq", {"a": 3, "b": 2})
    assert report.ok
    assert report == SemanticsReport(lost={}, duplicated={}, reordered={})
    assert "OK" in report.summary()


def test_detects_loss() -> None:
    report = check_sequences(recs(("a", 0), ("a", 3)), "key", "seq", {"a": 5, "b": 2})
    assert not report.ok
    assert report.lost == {"a": [1, 2, 4], "b": [0, 1]}
    assert report.duplicated == {} and report.reordered == {}
    summary = report.summary()
    assert "lost 5 event(s) on 2 key(s)" in summary
    assert "a [1-2, 4]" in summary and "b [0-1]" in summary


def test_detects_duplicates_from_a_replay() -> None:
    report = check_sequences(recs(("a", 0), ("a", 1), ("a", 2), ("a", 1), ("a", 2), ("a", 3)),
                             "key", "seq", {"a": 4})
    assert report.duplicated == {"a": [1, 2]}
    assert report.lost == {} and report.reordered == {}
    assert "duplicated 2 event(s) on 1 key(s): a [1-2]" in report.summary()


def test_detects_reordering() -> None:
    report = check_sequences(recs(("a", 0), ("a", 2), ("a", 1), ("b", 1), ("b", 0)),
                             "key", "seq", {"a": 3, "b": 2})
    assert report.reordered == {"a": [(2, 1)], "b": [(1, 0)]}
    assert report.lost == {} and report.duplicated == {}
    assert "1 after 2" in report.summary()


def test_detects_unexpected_keys_and_seqs() -> None:
    report = check_sequences(recs(("a", 0), ("a", 7), ("z", 0), ("a", -1)),
                             "key", "seq", {"a": 1})
    assert report.unexpected == {"a": [7, -1], "z": [0]}
    assert not report.ok
    assert "unexpected 3 event(s) on 2 key(s)" in report.summary()


def test_summary_truncates_long_reports() -> None:
    report = check_sequences([], "key", "seq", {f"k{i}": 3 for i in range(20)})
    summary = report.summary()
    assert "lost 60 event(s) on 20 key(s)" in summary
    assert "15 more key(s)" in summary


def test_malformed_records_raise() -> None:
    with pytest.raises(SemanticsError, match="has no field 'seq'"):
        check_sequences([{"key": "a"}], "key", "seq", {"a": 1})
    with pytest.raises(SemanticsError, match="not an int"):
        check_sequences([{"key": "a", "seq": "0"}], "key", "seq", {"a": 1})
