"""``scaled_round`` against ``round`` bit for bit where its shortcut is nearest to slipping: the
products near a half at the top of its range, where the product's rounding error is largest."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.rounding import _SCALED_LIMIT, scaled_round


def _same(a: float, b: float) -> bool:
    return (
        a.hex() == b.hex()
        if not (math.isnan(a) or math.isnan(b))
        else math.isnan(a) == math.isnan(b)
    )


def _around(x: float, steps: int) -> list[float]:
    """``x`` and the ``steps`` floats on either side of it."""
    out = [x]
    up = down = x
    for _ in range(steps):
        up, down = math.nextafter(up, math.inf), math.nextafter(down, -math.inf)
        out += [up, down]
    return out


@st.composite
def _top_of_range_halves(draw: st.DrawFn) -> tuple[float, int]:
    """A float whose product with ``10**digits`` is near a half, between 2**28 and 2**55: below,
    across and above the shortcut's limit."""
    digits = draw(st.integers(0, 8))
    whole = draw(st.integers(2**28, 2**55)) * draw(st.sampled_from([1, -1]))
    x = (whole + draw(st.sampled_from([0.5, 0.0, 0.499, 0.501, 0.4995, 0.5005]))) / 10.0**digits
    return draw(st.sampled_from(_around(x, 12))), digits


@settings(max_examples=examples(3000), deadline=None)
@given(_top_of_range_halves())
def test_scaled_round_is_round_at_the_top_of_its_range(case: tuple[float, int]) -> None:
    x, digits = case
    assert _same(scaled_round(x, digits, 10.0**digits), round(x, digits)), (x, digits)


def test_scaled_round_is_round_on_every_float_near_halves_below_its_limit() -> None:
    """Every float within 40 ulps of a half, for wholes under the limit and up to twice above it
    (8 decimals, as the snapshot walks round): the error of the product is largest there."""
    scale = 10.0**8
    for top in (_SCALED_LIMIT, 2 * _SCALED_LIMIT, 4 * _SCALED_LIMIT):
        for k in range(1, 300):
            whole = int(top) - k * 7_919
            for x in _around((whole + 0.5) / scale, 40):
                assert _same(scaled_round(x, 8, scale), round(x, 8)), x
