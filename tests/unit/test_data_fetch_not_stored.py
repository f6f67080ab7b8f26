"""``runner.data.stored_rows.not_stored_settlements``: a resumed funding fetch appends only settlements its partial
file does not hold, so stored and appended rows together never hold two settlements closer than
funding settles, and every stored row stays as it was."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from runner.data.stored_rows import FUNDING_MIN_GAP_MS, not_stored_settlements

_HOUR = 3_600_000


def _settlements(draw_times: list[int]) -> list[int]:
    """Times at least ``FUNDING_MIN_GAP_MS`` apart, as ``_settlements`` leaves a page."""
    kept: list[int] = []
    for at in sorted(draw_times):
        if not kept or at - kept[-1] >= FUNDING_MIN_GAP_MS:
            kept.append(at)
    return kept


_TIMES = st.lists(st.integers(0, 48 * _HOUR), max_size=40).map(_settlements)
_RATES = st.sampled_from([0.0001, -0.0002, 0.0])


@given(stored=_TIMES, fetched=_TIMES, rates=st.lists(_RATES, min_size=40, max_size=40))
def test_stored_and_appended_rows_are_one_per_settlement(
    stored: list[int], fetched: list[int], rates: list[float]
) -> None:
    held = {at: rates[i] for i, at in enumerate(stored)}
    rows = [(at, rates[-1 - i]) for i, at in enumerate(fetched)]
    new = not_stored_settlements(rows, held, "BTC/USDT funding", Path("partial.csv"))
    assert set(new) <= set(rows)
    times = sorted([*held, *(at for at, _ in new)])
    assert all(b - a >= FUNDING_MIN_GAP_MS for a, b in itertools.pairwise(times))
    far = [(at, r) for at, r in rows if all(abs(at - t) >= FUNDING_MIN_GAP_MS for t in held)]
    assert new == far
