"""Whatever numbers a Binance derivatives row or a Farside figure holds, what is parsed from it
stays finite: it is refused (a malformed body or page) or its values, sums and z-score are numbers."""

from __future__ import annotations

import math
from html import escape

from fakes.context_bodies import taker_ratio, top_long_short
from fakes.etf_page import farside_page
from hypothesis import given
from hypothesis import strategies as st

from derivatives.binance import LongShortRow, TakerRow, zscore
from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.etf_flow import etf_flow_from_html
from derivatives.http import parse_body

ETF_NOW_MS = 1_740_787_200_000 + 86_400_000  # the day after the fake page's latest
ANY_FLOAT = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e308, -1e308])


@given(st.lists(ANY_FLOAT, min_size=5, max_size=30))
def test_long_short_rows_give_a_finite_z_score_or_are_refused(ratios: list[float]) -> None:
    rows = []
    for ratio in ratios:
        try:
            row = {**top_long_short("BTCUSDT")[0], "longShortRatio": repr(ratio)}
            rows.append(parse_body(LongShortRow, row, what="topLongShortAccountRatio"))
        except SourceFailedError:
            continue
    z = zscore([r.longShortRatio for r in rows])
    assert z is None or math.isfinite(z)


@given(st.lists(st.tuples(ANY_FLOAT, ANY_FLOAT), min_size=1, max_size=12))
def test_taker_rows_give_a_finite_volume_delta_or_are_refused(
    volumes: list[tuple[float, float]],
) -> None:
    rows = []
    for buy, sell in volumes:
        try:
            row = {**taker_ratio()[0], "buyVol": repr(buy), "sellVol": repr(sell)}
            rows.append(parse_body(TakerRow, row, what="takerlongshortRatio"))
        except SourceFailedError:
            continue
    assert math.isfinite(sum(r.buyVol - r.sellVol for r in rows))


@given(st.text(max_size=30) | st.floats().map(repr) | st.floats().map(lambda x: f"({x!r})"))
def test_an_etf_flow_figure_is_a_finite_flow_or_refused(figure: str) -> None:
    page = farside_page().replace(">94.3</span></td></tr>", f">{escape(figure)}</span></td></tr>")
    try:
        value = etf_flow_from_html(page, ETF_NOW_MS)
    except (SourceFailedError, SourceNotAvailableError):
        return
    assert math.isfinite(value["net_flow_usd_millions"])
    assert math.isfinite(value["sum_5d_usd_millions"])
    assert all(math.isfinite(v) for v in value["by_fund_usd_millions"].values())
