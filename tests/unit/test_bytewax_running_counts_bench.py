"""bench/bytewax_running_counts.py counts a Bytewax run only if it wrote every running
count once: per word exactly 1..n, where n is the word's count in the corpus (the check
runs without Bytewax installed)."""

from __future__ import annotations

import pytest

from bench.bytewax_running_counts import check_rows, corpus_counts


def _rows(path, pairs):
    path.write_text("".join(f'{{"word": "{w}", "count": {c}}}\n' for w, c in pairs))


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "part-00000.txt").write_text("a b a\nc a\n")
    (d / "part-00001.txt").write_text("b\n")
    (d / "notes.txt").write_text("x y z\n")  # only part-*.txt is the corpus
    return d


def test_every_running_count_once_passes(tmp_path, corpus):
    expected = corpus_counts(str(corpus))
    assert expected == {"a": 3, "b": 2, "c": 1}
    out = tmp_path / "out"
    out.mkdir()
    _rows(out / "rows-0.jsonl", [("a", 1), ("a", 2), ("c", 1)])
    _rows(out / "rows-1.jsonl", [("b", 1), ("a", 3), ("b", 2)])
    assert check_rows(str(out), expected) == 6


@pytest.mark.parametrize("rows, says", [
    ([("a", 1), ("a", 2), ("a", 2), ("b", 1), ("b", 2), ("c", 1)], "'a'"),  # a duplicate
    ([("a", 1), ("a", 3), ("b", 1), ("b", 2), ("c", 1)], "'a'"),  # a count lost
    ([("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)], "words written 2"),  # a word lost
])
def test_a_lost_or_repeated_running_count_fails_the_run(tmp_path, corpus, rows, says):
    out = tmp_path / "out"
    out.mkdir()
    _rows(out / "rows-0.jsonl", rows)
    with pytest.raises(SystemExit, match=says):
        check_rows(str(out), corpus_counts(str(corpus)))


def test_a_line_that_is_not_a_row_fails_the_run(tmp_path, corpus):
    out = tmp_path / "out"
    out.mkdir()
    (out / "rows-0.jsonl").write_text('{"word": "a", "count": 1}\nnot json\n')
    with pytest.raises(SystemExit, match="not a row"):
        check_rows(str(out), corpus_counts(str(corpus)))
