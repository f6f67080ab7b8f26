"""``ticker_finite`` answers as the dump-and-walk check it stands in for, on any floats."""

from __future__ import annotations

import typing

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.indicators import TimeframeSummary
from agent.snapshot import TickerSnapshot
from agent.snapshot_finite import non_finite, ticker_finite

_float = st.one_of(
    st.none(),
    st.floats(),  # NaN and infinities included
    st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e308]),
)
_summary = st.builds(
    TimeframeSummary,
    trend=st.sampled_from([None, "up", "down", "flat"]),
    bollinger_position=_float,
    rsi=_float,
    unavailable=st.dictionaries(st.sampled_from(["rsi", "trend"]), st.text(max_size=5)),
)
_ticker = st.builds(
    TickerSnapshot,
    price=_float,
    change_1h_pct=_float,
    return_4h_pct=_float,
    return_24h_pct=_float,
    volume_24h=_float,
    volume_ratio=_float,
    return_zscore=_float,
    multi_tf=st.dictionaries(st.sampled_from(["15m", "1h", "4h"]), _summary, max_size=3),
)


@settings(max_examples=examples(500), deadline=None)
@given(_ticker)
def test_ticker_finite_answers_as_the_walk_of_the_dump(snapshot: TickerSnapshot) -> None:
    assert ticker_finite(snapshot) is (not non_finite(snapshot.model_dump()))


def _float_fields(model: type[typing.Any]) -> dict[str, object]:
    return {name: field.annotation for name, field in model.model_fields.items()}


def test_the_models_hold_floats_only_where_ticker_finite_looks() -> None:
    """A new field that can hold a float elsewhere (a list, a nested model) needs the check
    taught: this fails first."""
    optional_float = float | None
    ticker = _float_fields(TickerSnapshot)
    assert ticker.pop("multi_tf") == dict[str, TimeframeSummary]
    assert all(kind == optional_float for kind in ticker.values()), ticker
    summary = _float_fields(TimeframeSummary)
    assert summary.pop("unavailable") == dict[str, str]
    assert float not in typing.get_args(summary.pop("trend"))
    assert all(kind == optional_float for kind in summary.values()), summary
