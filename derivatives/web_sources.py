"""Context from outside Binance: Fear & Greed, stablecoin supply, trending coins.

(BTC ETF flow: ``derivatives.etf_flow``.)

Each ``fetch_*`` asks one public, key-less API and returns the snapshot field's value, raising the
``derivatives.cache`` errors on failure (``CachedSource`` turns them into reasons). Base URLs come
from ``DerivativesConfig`` (real hosts by default; tests and the simulator pass loopback URLs).

Trending coin names are UNTRUSTED text that ends up in a language model's prompt: only letters,
digits, spaces and a few punctuation marks survive, each name is bounded, and the list is too.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from core.clock import DAY_MS, EARLIEST_TIME_MS, LATEST_TIME_MS
from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.http import get_json, parse_body, snippet
from derivatives.liquidations import MAX_FUTURE_MS

FNG_PATH: Final = "/fng/"
STABLECOINS_PATH: Final = "/stablecoins"
TRENDING_PATH: Final = "/api/v3/search/trending"
STABLECOINS: Final = ("USDT", "USDC")
#: US$ 10 trillion: USDT, the largest, circulates about US$ 150 billion
MAX_SUPPLY_USD: Final = 1e13
#: USDT and USDC have circulated billions for years: less than a million is no supply of theirs
#: (a past one of 1e-300 made an infinite change)
MIN_SUPPLY_USD: Final = 1e6
NAME_MAX_CHARS: Final = 32
SYMBOL_MAX_CHARS: Final = 12
TRENDING_MAX_COINS: Final = 10
_ALLOWED_PUNCTUATION: Final = frozenset(" -._()&'")
# Lists and maps a provider sends are validated on the event loop: each is capped far above any
# real answer (1 index, ~15 trending coins, ~300 stablecoins of a few pegs), so a hostile one
# of 300,000 items is refused at once, not read for seconds while nothing else runs.
MAX_ITEMS: Final = 10_000


class _Lenient(BaseModel):
    # "NaN" and "Infinity" are strings pydantic's float would take: no provider means them
    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)


# -- alternative.me Fear & Greed -------------------------------------------------------------


class _FngEntry(_Lenient):
    value: int = Field(ge=0, le=100)
    value_classification: str
    # in seconds: milliseconds, a negative or a 30-digit one is no day (an int past 64 bits would
    # even stop the snapshot's JSON being written)
    timestamp: int = Field(ge=EARLIEST_TIME_MS // 1000, lt=LATEST_TIME_MS // 1000)


class _FngBody(_Lenient):
    data: list[_FngEntry] = Field(max_length=MAX_ITEMS)
    metadata: dict[str, Any] = Field(default_factory=dict)


FNG_WHAT: Final = "Fear & Greed (alternative.me)"


async def fetch_fear_greed(base_url: str | None, now_ms: int | None = None) -> dict[str, Any]:
    """``{value, classification, timestamp_ms}`` of the latest daily index; one dated after
    ``now_ms`` (with a few minutes' skew) is a malformed body, not today's. One whose day is
    over is no value: a source that goes on answering but stops updating was taken as today's
    for ever; now the cache serves the last one stale, then says since when (as replay does
    past the recording's end)."""
    base_url = _configured(base_url, FNG_WHAT)
    payload = await get_json(_url(base_url, FNG_PATH), {"limit": "1"}, what=FNG_WHAT)
    value = fear_greed_from_payload(payload)
    ahead_ms = value["timestamp_ms"] - now_ms if now_ms is not None else 0
    if ahead_ms > MAX_FUTURE_MS:
        raise SourceFailedError(f"{FNG_WHAT}: malformed body: an index {ahead_ms} ms ahead")
    if ahead_ms <= -DAY_MS:
        day = datetime.fromtimestamp(value["timestamp_ms"] / 1000, UTC).date()
        raise SourceNotAvailableError(f"{FNG_WHAT}: no value for today: the newest is of {day}")
    return value


def fear_greed_from_payload(payload: Any, *, what: str = FNG_WHAT) -> dict[str, Any]:
    """An alternative.me /fng/ body (newest first) -> ``{value, classification, timestamp_ms}``.

    Shared by ``fetch_fear_greed`` and replay (``sim.recorded_sources``), so both read the
    index the same way. No data (alternative.me's error shape) is ``SourceNotAvailableError``.
    """
    body = parse_body(_FngBody, payload, what=what)
    error = body.metadata.get("error")
    if not body.data:
        raise SourceNotAvailableError(f"{what}: no value: {snippet(str(error or 'empty data'))}")
    latest = body.data[0]
    return {
        "value": latest.value,
        "classification": clean_text(latest.value_classification, NAME_MAX_CHARS),
        "timestamp_ms": latest.timestamp * 1000,
    }


# -- DeFiLlama stablecoins ---------------------------------------------------------------------


class _Pegged(_Lenient):
    symbol: str
    circulating: dict[str, float] = Field(max_length=MAX_ITEMS)
    circulatingPrevDay: dict[str, float] | None = Field(None, max_length=MAX_ITEMS)
    circulatingPrevWeek: dict[str, float] | None = Field(None, max_length=MAX_ITEMS)


class _StablecoinsBody(_Lenient):
    peggedAssets: list[_Pegged] = Field(max_length=MAX_ITEMS)


async def fetch_stablecoin_supply(base_url: str | None) -> dict[str, Any]:
    """USDT + USDC circulating supply in USD, with 1-day and 7-day changes when DeFiLlama has them."""
    what = "stablecoin supply (DeFiLlama)"
    base_url = _configured(base_url, what)
    payload = await get_json(
        _url(base_url, STABLECOINS_PATH), {"includePrices": "false"}, what=what
    )
    body = parse_body(_StablecoinsBody, payload, what=what)
    by_symbol: dict[str, _Pegged] = {}
    for asset in body.peggedAssets:  # the list is sorted by size: keep the largest of a symbol
        by_symbol.setdefault(asset.symbol.upper(), asset)
    missing = [
        s for s in STABLECOINS if s not in by_symbol or "peggedUSD" not in by_symbol[s].circulating
    ]
    if missing:
        raise SourceNotAvailableError(f"{what}: no USD circulation for {missing}")
    now = {s: by_symbol[s].circulating["peggedUSD"] for s in STABLECOINS}
    for symbol, usd in now.items():  # only these are read: another coin's oddity is no reason
        if not MIN_SUPPLY_USD <= usd <= MAX_SUPPLY_USD:
            raise SourceFailedError(f"{what}: malformed body: {symbol} circulates {usd:g} USD")
    out: dict[str, Any] = {f"{s.lower()}_usd": v for s, v in now.items()}
    out["total_usd"] = sum(now.values())
    for label, attr in (
        ("change_1d_pct", "circulatingPrevDay"),
        ("change_7d_pct", "circulatingPrevWeek"),
    ):
        before = [(getattr(by_symbol[s], attr) or {}).get("peggedUSD") for s in STABLECOINS]
        if all(b is not None and MIN_SUPPLY_USD <= b <= MAX_SUPPLY_USD for b in before):
            total_before = sum(b for b in before if b is not None)
            out[label] = (out["total_usd"] / total_before - 1.0) * 100.0
    return out


# -- CoinGecko trending ------------------------------------------------------------------------


class _TrendingItem(_Lenient):
    name: str
    symbol: str
    market_cap_rank: int | None = None


class _TrendingCoin(_Lenient):
    item: _TrendingItem


class _TrendingBody(_Lenient):
    coins: list[_TrendingCoin] = Field(max_length=MAX_ITEMS)


async def fetch_trending(base_url: str | None) -> str:
    """A one-line summary of CoinGecko's trending coins (sanitised names), for ``news_summary``."""
    what = "trending coins (CoinGecko)"
    base_url = _configured(base_url, what)
    payload = await get_json(_url(base_url, TRENDING_PATH), {}, what=what)
    body = parse_body(_TrendingBody, payload, what=what)
    names = []
    for coin in body.coins[:TRENDING_MAX_COINS]:
        name = clean_text(coin.item.name, NAME_MAX_CHARS)
        symbol = clean_text(coin.item.symbol, SYMBOL_MAX_CHARS).upper()
        if name or symbol:
            names.append(f"{name} ({symbol})" if name and symbol else name or symbol)
    if not names:
        raise SourceNotAvailableError(f"{what}: no trending coins listed")
    return "CoinGecko trending coins (names are third-party text): " + ", ".join(names)


def clean_text(text: str, max_chars: int) -> str:
    """Letters, digits, spaces and ``-._()&'`` only, whitespace collapsed, at most ``max_chars``."""
    kept = []
    for char in unicodedata.normalize("NFKC", text):
        category = unicodedata.category(char)
        if category[0] in "LN" or char in _ALLOWED_PUNCTUATION:
            kept.append(char)
        elif char.isspace():
            kept.append(" ")
    return " ".join("".join(kept).split())[:max_chars].strip()


def _configured(base_url: str | None, what: str) -> str:
    if base_url is None:
        raise SourceNotAvailableError(f"{what}: no base URL configured (source disabled)")
    return base_url


def _url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path


__all__ = [
    "FNG_WHAT",
    "clean_text",
    "fear_greed_from_payload",
    "fetch_fear_greed",
    "fetch_stablecoin_supply",
    "fetch_trending",
]
