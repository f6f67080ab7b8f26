"""MetricBoard: fed by TickFeatures and derivatives values, read by the gate's conditions."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_gate_support import T0_MS, make_features, make_tick, rig

from gate.conditions import build_metric_registry
from gate.metrics import MetricBoard, MetricSource
from market.features import TickFeatures


def test_features_fill_the_tickers_metrics_and_none_empties_them() -> None:
    board = MetricBoard()
    board.update_features(make_features("ETH/USDT", zscore=-1.5, price=3300.0))
    assert board.snapshot() == {
        "eth_price": 3300.0,
        "eth_change_1h_pct": 0.5,
        "eth_change_4h_pct": -1.0,
        "eth_change_24h_pct": 2.0,
        "eth_return_zscore": -1.5,
        "eth_volume_ratio": 1.1,
    }
    later = TickFeatures(
        ticker="ETH/USDT",
        at_ms=1,
        price=3310.0,
        change_1h_pct=None,
        change_4h_pct=None,
        change_24h_pct=math.nan,
        volume_ratio=None,
        return_zscore=None,
        unavailable={"change_1h_pct": "history too short"},
    )
    board.update_features(later)
    assert board.snapshot() == {"eth_price": 3310.0}
    assert board.get("eth_change_1h_pct") is None


def test_a_ticker_outside_the_table_is_reported_once_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    board = MetricBoard()
    with caplog.at_level(logging.WARNING, logger="gate.metrics"):
        board.update_features(make_features("DOGE/USDT"))
        board.update_features(make_features("DOGE/USDT"))
    assert board.snapshot() == {}
    assert len(caplog.records) == 1
    assert "ticks of DOGE/USDT feed no wake-condition metrics" in caplog.records[0].getMessage()
    doge = MetricBoard(build_metric_registry(["DOGE/USDT"]))
    doge.update_features(make_features("DOGE/USDT", price=0.3))
    assert doge.get("doge_price") == 0.3


def test_derivatives_values_are_checked_against_the_table() -> None:
    board = MetricBoard()
    board.update({"btc_funding_rate": 0.0001, "fear_greed": 25})
    assert board.get("btc_funding_rate") == 0.0001 and board.get("fear_greed") == 25.0
    with pytest.raises(ValueError, match=r"unknown metric\(s\) \['basis_pct'\]"):
        board.update({"basis_pct": 0.1, "funding_rate": 0.0002})
    assert board.get("funding_rate") is None  # nothing applied
    with pytest.raises(TypeError, match="fear_greed must be a number, got str"):
        board.update({"fear_greed": "25"})  # type: ignore[dict-item]
    board.update({"fear_greed": None, "btc_funding_rate": math.nan})
    assert board.snapshot() == {}
    board.update({"long_short_ratio": 1.2})
    board.clear("long_short_ratio")
    assert board.get("long_short_ratio") is None


def test_the_gate_reads_the_board() -> None:
    r = rig()
    board: MetricSource = MetricBoard()
    plain: MetricSource = {"btc_price": 1.0}  # a dict is a MetricSource too
    assert plain.get("btc_price") == 1.0
    assert isinstance(board, MetricBoard)
    r.gate.update_from_agent(
        3600, [{"metric": "sol_return_zscore", "operator": "abs_gt", "threshold": 1.5}]
    )
    features = make_features("SOL/USDT", zscore=1.6)
    board.update_features(features)
    verdict = r.gate.evaluate(make_tick("SOL/USDT"), features, board)
    assert verdict.reasons == ("wake:sol_return_zscore abs_gt 1.5",)


def _feature_values(ticker: str, values: tuple[float | None, ...]) -> TickFeatures:
    price, c1h, c4h, c24h, zscore, volume = values
    return TickFeatures(
        ticker=ticker,
        at_ms=T0_MS,
        price=100.0 if price is None else price,
        change_1h_pct=c1h,
        change_4h_pct=c4h,
        change_24h_pct=c24h,
        volume_ratio=volume,
        return_zscore=zscore,
    )


MAYBE = st.sampled_from([None, math.nan, -1.0, 0.5, 2.0])
#: BTC/USDT:USDT feeds the same metric names as BTC/USDT
FEATURES = st.lists(
    st.builds(
        _feature_values,
        st.sampled_from(["BTC/USDT", "ETH/USDT", "BTC/USDT:USDT"]),
        st.tuples(MAYBE, MAYBE, MAYBE, MAYBE, MAYBE, MAYBE),
    ),
    min_size=1,
    max_size=4,
)
NAMES = st.sampled_from(["btc_price", "btc_return_zscore", "eth_volume_ratio", "fear_greed"])


def _put(values: dict[str, float], name: str, value: float | None) -> None:
    if value is None or math.isnan(value):
        values.pop(name, None)
    else:
        values[name] = value


def _write(values: dict[str, float], features: TickFeatures) -> None:
    """What ``update_features`` writes, every time."""
    prefix = features.ticker.partition("/")[0].lower()
    values[f"{prefix}_price"] = features.price
    _put(values, f"{prefix}_change_1h_pct", features.change_1h_pct)
    _put(values, f"{prefix}_change_4h_pct", features.change_4h_pct)
    _put(values, f"{prefix}_change_24h_pct", features.change_24h_pct)
    _put(values, f"{prefix}_return_zscore", features.return_zscore)
    _put(values, f"{prefix}_volume_ratio", features.volume_ratio)


@settings(max_examples=examples(300), deadline=None)
@given(pool=FEATURES, ops=st.lists(st.tuples(st.integers(0, 5), NAMES, MAYBE), max_size=40))
def test_feeding_the_same_features_again_leaves_what_writing_them_would(
    pool: list[TickFeatures], ops: list[tuple[int, str, float | None]]
) -> None:
    """The board skips features it wrote last under the same names; the values (and their
    order: snapshots are journalled) must be what writing every time gives, after any mix of
    feeds, ``update`` and ``clear``."""
    board, written = MetricBoard(), dict[str, float]()
    for op, name, value in ops:
        if op == 4:
            board.update({name: value})
            _put(written, name, value)
        elif op == 5:
            board.clear(name)
            written.pop(name, None)
        else:
            features = pool[op % len(pool)]
            board.update_features(features)
            _write(written, features)
        assert list(board.snapshot().items()) == list(written.items())


#: a derivatives poll sends the same metrics again, or nearly: each value's twins are equal to it
#: but not the same (a signed zero, an int for a float, a bool for an int, a string, a fresh NaN)
_TWINS: tuple[tuple[object, ...], ...] = (
    (0.0, -0.0, 0),
    (1.0, 1, True, "1"),
    (54.0, 54, float("54.0")),
    (math.nan, float("nan"), None),
)
#: derivatives metrics, a tick metric (``update_features`` writes it too), one not in the table
UPDATE_NAMES = st.sampled_from(["btc_funding_rate", "funding_rate", "fear_greed", "eth_price"])


def _apply(written: dict[str, float], values: dict[str, object]) -> str | None:
    """What ``update`` does, every time: every check first, then every write; the error else."""
    if "basis_pct" in values:  # not in the metric table
        return "ValueError"
    for value in values.values():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            return "TypeError"
    for name, value in values.items():
        _put(written, name, None if value is None else float(value))  # type: ignore[arg-type]
    return None


def _bits(values: dict[str, float]) -> list[tuple[str, str]]:
    return [(name, float(value).hex()) for name, value in values.items()]


@st.composite
def _updates(draw: st.DrawFn) -> list[dict[str, object]]:
    """A mapping of metrics and variants of it: a value swapped for a twin, or names reordered."""
    names = draw(st.lists(UPDATE_NAMES, unique=True, min_size=1, max_size=4))
    groups = [draw(st.sampled_from(_TWINS)) for _ in names]
    picks = [draw(st.integers(0, len(group) - 1)) for group in groups]
    updates = [dict(zip(names, (g[i] for g, i in zip(groups, picks, strict=True)), strict=True))]
    for _ in range(draw(st.integers(1, 3))):
        variant = dict(updates[0])
        way = draw(st.integers(0, 4))
        if way == 0:
            variant["basis_pct"] = 0.0
        elif way <= 3:
            k = draw(st.integers(0, len(names) - 1))
            variant[names[k]] = groups[k][draw(st.integers(0, len(groups[k]) - 1))]
        else:
            variant = dict(reversed(variant.items()))
        updates.append(variant)
    return updates


@settings(max_examples=examples(400), deadline=None)
@given(
    pool=FEATURES,
    updates=_updates(),
    ops=st.lists(st.tuples(st.integers(0, 9), NAMES | UPDATE_NAMES), min_size=10, max_size=40),
)
def test_the_same_update_again_leaves_what_applying_it_would(
    pool: list[TickFeatures],
    updates: list[dict[str, object]],
    ops: list[tuple[int, str]],
) -> None:
    """``update`` skips metrics it applied last; the values (to the sign, in their order) and the
    errors must be what applying them every time gives, whatever fed, updated or cleared
    between (an update naming a tick metric, a new ticker's feed, a clear)."""
    board, written = MetricBoard(), dict[str, float]()
    for op, name in ops:
        if op >= 5:
            values = updates[op % len(updates)]
            want = _apply(written, values)
            try:
                board.update(values)  # type: ignore[arg-type]
                got = None
            except (ValueError, TypeError) as exc:
                got = type(exc).__name__
            assert got == want
        elif op == 4:
            board.clear(name)
            written.pop(name, None)
        else:
            features = pool[op % len(pool)]
            board.update_features(features)
            _write(written, features)
        assert _bits(board.snapshot()) == _bits(written)
