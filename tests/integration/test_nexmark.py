"""Every Nexmark query on jstormpy (bench/nexmark) commits exactly what the plain-Python
reference computes from the same events file: real LocalCluster runs, exactly-once with
1 s checkpoints, parallelism 2, a small seeded file (40 s of event time, out of order by
up to 1 s)."""

from __future__ import annotations

import pytest

from bench.nexmark import engine_jstormpy
from bench.nexmark.check import compare, read_output
from bench.nexmark.generator import GeneratorConfig, read_events, write_events
from bench.nexmark.queries import QUERIES

EVENTS = 8_000
RATE = 200        # events per second of event time: 40 s, four 10 s windows
DELAY_MS = 1_000


@pytest.fixture(scope="module")
def events_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("nexmark") / "events.jsonl")
    write_events(GeneratorConfig(EVENTS, seed=11, rate=RATE, delay_ms=DELAY_MS), path)
    return path


@pytest.mark.parametrize("query", list(QUERIES))
def test_query_commits_the_reference_output(query: str, events_file: str, tmp_path) -> None:
    out = str(tmp_path / "out")
    engine_jstormpy.run(query, events_file, out, DELAY_MS, par=2)
    rows = read_output(out)
    verdict = compare(query, list(read_events(events_file)), rows)
    assert verdict.ok, f"{query}: {verdict.detail}"
    assert rows, f"{query} committed nothing"
