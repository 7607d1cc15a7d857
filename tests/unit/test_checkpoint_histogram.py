"""The checkpoint-duration histogram served at /metrics is cumulative."""

from jstormpy.metrics import CHECKPOINT_BUCKETS_MS, CumulativeHistogram


def test_checkpoint_duration_histogram_never_rolls_over():
    # the TM keeps 200 checkpoints of history; the histogram must count all of them
    h = CumulativeHistogram(CHECKPOINT_BUCKETS_MS)
    for i in range(300):
        h.observe(float(i % 40) * 10)
    cum = h.cumulative()
    assert h.count == 300 and cum[-1] == (float("inf"), 300)
    assert [n for _b, n in cum] == sorted(n for _b, n in cum)
    assert cum[0] == (10.0, 16)  # 0 and 10 ms, 8 times each
    assert h.sum == sum(float(i % 40) * 10 for i in range(300))
