"""bench/reduce_chain.py measures the running count's real chain: its sink stages leave
the committed jsonl a user would read (every running count, json.dumps's bytes, in
order), so the figures are of a chain that did the work."""

from __future__ import annotations

import glob
import json
import os

from bench.reduce_chain import corpus_words, stages


def _committed(out_dir: str) -> list[str]:
    lines: list[str] = []
    for path in sorted(glob.glob(os.path.join(out_dir, "part-*.jsonl"))):
        with open(path) as f:
            lines.extend(f.read().splitlines(keepends=True))
    return lines


def test_chain_and_sink_write_commit_every_running_count(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    sentences = [" ".join(f"w{(i * 7 + j * 3) % 40}" for j in range(9)) for i in range(300)]
    sentences[5] = 'say "hi" café back\\slash'  # rows the plain-text columns refuse
    (corpus / "part-00000.txt").write_text("\n".join(sentences) + "\n")
    words = corpus_words(str(corpus), 10_000)
    assert len(words) == 299 * 9 + 4
    expected, counts = [], {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
        expected.append(json.dumps({"word": w, "count": counts[w]},
                                   separators=(",", ":")) + "\n")
    out = tmp_path / "out"
    table = stages(words, str(out), commit_every=2048)
    for name in ("chain", "sink write"):
        assert table[name]() == len(words)
        assert len(glob.glob(str(out / "part-*.jsonl"))) == 2  # 6 batches of 512, a txn per 4
        assert _committed(str(out)) == expected, name
