"""The intra-candle price path: how one recorded 5m bar becomes a stream of kline updates.

One shared implementation for the simulator (#3) and replay (#8).

Path rule. A bar with ``n`` updates (``n = bar duration / update interval``, at least 4) visits four
vertices at update indices ``0, (n-1)//3, 2(n-1)//3, n-1``:

- a rising or flat bar (close >= open) walks open -> low -> high -> close,
- a falling bar walks open -> high -> low -> close,

with straight-line interpolation between vertices. Every vertex lands exactly on an update, so the
updates of a bar reproduce its recorded open, high, low and close exactly. Volume accrues linearly,
``volume * (i + 1) / n``, and the last update carries the recorded volume exactly.
"""

from __future__ import annotations

from typing import NamedTuple

MIN_UPDATES_PER_BAR = 4


class BarState(NamedTuple):
    """The bar as seen after update ``i``: last price, running extremes, volume so far."""

    price: float
    high: float
    low: float
    volume: float


def vertex_indices(updates_per_bar: int) -> tuple[int, int, int, int]:
    n = updates_per_bar
    if n < MIN_UPDATES_PER_BAR:
        raise ValueError(f"a bar needs at least {MIN_UPDATES_PER_BAR} updates, got {n}")
    return 0, (n - 1) // 3, 2 * (n - 1) // 3, n - 1


def vertices(open_: float, high: float, low: float, close: float) -> tuple[float, ...]:
    if close >= open_:
        return open_, low, high, close
    return open_, high, low, close


def price_at(
    open_: float, high: float, low: float, close: float, index: int, updates_per_bar: int
) -> float:
    """Price of update ``index`` (0-based) of a bar with ``updates_per_bar`` updates."""
    if not 0 <= index < updates_per_bar:
        raise ValueError(f"update index {index} outside 0..{updates_per_bar - 1}")
    marks = vertex_indices(updates_per_bar)
    prices = vertices(open_, high, low, close)
    for leg in range(3):
        start, end = marks[leg], marks[leg + 1]
        if index <= end:
            if index == end:
                return prices[leg + 1]
            if index == start:
                return prices[leg]
            frac = (index - start) / (end - start)
            return prices[leg] + (prices[leg + 1] - prices[leg]) * frac
    return close  # unreachable: marks[3] == updates_per_bar - 1


def state_at(
    open_: float,
    high: float,
    low: float,
    close: float,
    volume: float,
    index: int,
    updates_per_bar: int,
) -> BarState:
    """The bar after update ``index``: its running high/low only include prices already visited."""
    price = price_at(open_, high, low, close, index, updates_per_bar)
    marks = vertex_indices(updates_per_bar)
    prices = vertices(open_, high, low, close)
    seen = [prices[k] for k in range(4) if marks[k] <= index] + [price]
    vol = volume if index == updates_per_bar - 1 else volume * (index + 1) / updates_per_bar
    return BarState(price=price, high=max(seen), low=min(seen), volume=vol)
