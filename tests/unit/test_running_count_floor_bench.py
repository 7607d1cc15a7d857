"""bench/running_count_floor.py does the running count's own work: the file it writes
holds every running count in order, as json.dumps writes the sink's records, so its
figure is of the work the engine's share is compared with."""

from __future__ import annotations

import json

from bench.running_count_floor import main, run_once


def test_the_floor_writes_every_running_count_as_the_sink_would(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    sentences = [" ".join(f"w{(i * 7 + j * 3) % 40}" for j in range(9)) for i in range(300)]
    sentences[5] = 'say "hi" café back\\slash'
    (corpus / "part-00000.txt").write_text("\n".join(sentences[:150]) + "\n")
    (corpus / "part-00001.txt").write_text("\n".join(sentences[150:]) + "\n")
    expected, counts = [], {}
    for w in " ".join(sentences).split():
        counts[w] = counts.get(w, 0) + 1
        expected.append(json.dumps({"word": w, "count": counts[w]}, separators=(",", ":")))
    out = tmp_path / "out.jsonl"
    words, user_s, sink_s = run_once(sorted(str(p) for p in corpus.iterdir()), str(out))
    assert words == len(expected) and user_s >= 0 and sink_s >= 0
    assert out.read_text().splitlines() == expected
    assert main(["--corpus", str(corpus), "--runs", "2"]) == 0
    assert f"{len(expected):,} words" in capsys.readouterr().out
