"""The report's loops written for speed against their plain formulas, and the paused collector."""

from __future__ import annotations

import gc
import math
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from market.guard import DEFAULT_MAX_PRICE
from report.figures import _buy_and_hold
from report.metrics import drawdown_series
from report.run_files import cycles_not_collected

_VALUES = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5)
_PRICE = st.sampled_from([None, "1", True, 0, -1.0, 2, 0.5, float("nan"), float("inf"), 3.25])
_TICKERS = st.dictionaries(
    st.sampled_from(["SOL/USDT", "BTC/USDT", "ETH/USDT"]),
    st.fixed_dictionaries({"price": _PRICE}) | st.just({}) | st.none(),
)


@given(st.lists(st.tuples(st.integers(0, 10**13), _VALUES), max_size=30))
def test_drawdown_is_its_max_formula(equity: list[tuple[int, float]]) -> None:
    expected, peak = [], -float("inf")
    for at_ms, value in equity:
        peak = max(peak, value)
        expected.append((at_ms, (1.0 - value / peak) * 100.0 if peak > 0 else 0.0))
    assert repr(drawdown_series(equity)) == repr(expected)


@given(
    st.lists(st.fixed_dictionaries({"snapshot": st.fixed_dictionaries({"tickers": _TICKERS})})),
    st.floats(0.5, 1e6),
)
def test_buy_and_hold_is_its_sorted_formula(records: list[dict[str, Any]], start: float) -> None:
    for at_ms, record in enumerate(records):
        record["at_ms"] = at_ms
    equity = [(0, start)]
    assert repr(_buy_and_hold(records, equity)) == repr(_hold_reference(records, equity))


def _hold_reference(
    decisions: list[dict[str, Any]], equity: list[tuple[int, float]]
) -> dict[str, list[tuple[int, float]]]:
    """``_buy_and_hold`` as written before (each record's tickers in sorted order), with its
    later rule: true, a price past the market guard's bound, and a point that overflows, are left
    out."""
    start = equity[0][1]
    first_price: dict[str, float] = {}
    lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for record in decisions:
        tickers = (record.get("snapshot") or {}).get("tickers") or {}
        for ticker, view in sorted(tickers.items()):
            price = (view or {}).get("price")
            if not isinstance(price, int | float) or isinstance(price, bool):
                continue
            if not 0 < price <= DEFAULT_MAX_PRICE:
                continue
            base = first_price.setdefault(ticker, float(price))
            if math.isfinite(start * price / base):
                lines[ticker].append((int(record["at_ms"]), start * price / base))
    return dict(sorted(lines.items()))


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_paused_and_left_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(RuntimeError), cycles_not_collected():
            assert not gc.isenabled()
            raise RuntimeError("a bad journal line")
        assert gc.isenabled() is enabled
        with cycles_not_collected():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
