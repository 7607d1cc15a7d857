"""The one-pass sliding round (``SlicedWindows._fused_round``) fires exactly what the
three-pass round (evict, push, fire) fires, in the same key order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jstormpy.window import Mean, SlidingWindows, WindowOperator
from jstormpy.window.sliced import SlicedWindows

from .helpers import SetAgg, drive, event_st, expand


def _three_pass_only(self: SlicedWindows, start: float, end: float) -> None:
    return None


@settings(max_examples=200, deadline=None)
@given(size=st.integers(2, 20), data=st.data(), raw=st.lists(event_st, max_size=80),
       lag=st.integers(0, 30), lateness=st.integers(0, 20), builtin=st.booleans())
def test_fused_round_equals_three_pass_round(size, data, raw, lag, lateness,  # noqa: PLR0917
                                             builtin) -> None:
    slide = data.draw(st.integers(1, size - 1))
    calls = expand(raw, lag)
    if builtin:  # numeric records for Mean
        calls = [(c[0], c[1], c[2], float(c[3][0])) if c[0] == "rec" else c for c in calls]

    def run(fused: bool) -> list[list[Any]]:
        op = WindowOperator(SlidingWindows(size, slide), Mean() if builtin else SetAgg(),
                            allowed_lateness_ms=lateness)
        sliced = op._sliced  # noqa: SLF001
        assert sliced is not None
        if not fused:
            sliced._fused_round = _three_pass_only.__get__(sliced)  # type: ignore[method-assign]  # noqa: SLF001
        out = drive(op, calls)
        out.append(op.finish())
        return out

    assert run(True) == run(False)


def test_fused_round_takes_the_steady_state() -> None:
    """A key per slice, every slice: every round after the first is the one-pass one."""
    op = WindowOperator(SlidingWindows(4, 1), Mean())
    sliced = op._sliced  # noqa: SLF001
    assert sliced is not None
    taken = []
    real = sliced._fused_round  # noqa: SLF001

    def spy(start: float, end: float) -> Any:
        res = real(start, end)
        taken.append(res is not None)
        return res

    sliced._fused_round = spy  # type: ignore[method-assign]  # noqa: SLF001
    for t in range(12):
        op.process("a", t, float(t))
        op.process("b", t, 1.0)
        op.advance_watermark(t)
    assert taken and all(taken)
    # [9, 13) holds a's records 9, 10, 11
    assert [f.result for f in op.finish() if f.key == "a"][:1] == [10.0]
