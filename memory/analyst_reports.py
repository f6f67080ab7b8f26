"""Each analyst's report, written from its own slice of the snapshot (as sent, plain JSON).

The builders read only the fields their analyst owns, so one analyst's report (and later its
model call) never carries another's inputs. A field the snapshot lacks is named unavailable in the
report, never filled in. Confidence is a plain rule per analyst, stated beside each builder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

_TIMEFRAMES = ("15m", "1h", "4h")
_DERIVATIVE_FIELDS = ("open_interest", "basis", "liquidations", "taker_delta", "long_short_ratio")

Built = tuple[str, float, dict[str, float | None], dict[str, str]]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _fmt2(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _numbers(prefix: str, value: Any, ticker: str) -> dict[str, float | None]:
    """Numeric leaves of a context field for ``ticker`` (a per-ticker dict, or a market-wide one)."""
    if isinstance(value, Mapping) and ticker in value:
        value = value[ticker]
    if _num(value) is not None:
        return {prefix: _num(value)}
    out: dict[str, float | None] = {}
    if isinstance(value, Mapping):
        for key, inner in sorted(value.items()):
            number = _num(inner)
            if number is not None and not str(key).endswith("_ms"):
                out[f"{prefix}.{key}"] = number
    return out


#: per timeframe: its name and the keys of its figures and label
_FRAME_KEYS = tuple((tf, f"rsi_{tf}", f"percent_b_{tf}", f"trend_{tf}") for tf in _TIMEFRAMES)
_CHANGE_KEYS = ("change_1h_pct", "return_4h_pct", "return_24h_pct", "return_zscore")
_AGREEMENT_CONFIDENCE = {3: 0.8, 2: 0.6}


def _finite(value: Any) -> float | None:
    """``_num`` with a short way for a float (x - x is 0.0 only when x is finite)."""
    if type(value) is float:
        return value if value - value == 0.0 else None
    return _num(value)


def _mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def market_report(sent: Mapping[str, Any], ticker: str) -> Built | None:
    """The multi-timeframe technical picture. Confidence: how many timeframes' trends agree.
    Written at every decision for every ticker, hence the short ways (same text, same figures)."""
    view = (sent.get("tickers") or {}).get(ticker)
    if not _mapping(view):
        return None
    price = _finite(view.get("price"))
    if price is None:
        return None
    figures: dict[str, float | None] = {"price": price}
    for key in _CHANGE_KEYS:
        figures[key] = _finite(view.get(key))
    labels: dict[str, str] = {}
    frames = []
    multi = view.get("multi_tf") or {}
    for tf, rsi_key, percent_b_key, trend_key in _FRAME_KEYS:
        summary = multi.get(tf)
        if not _mapping(summary):
            continue
        rsi = figures[rsi_key] = _finite(summary.get("rsi"))
        percent_b = figures[percent_b_key] = _finite(summary.get("bollinger_position"))
        trend = summary.get("trend")
        if isinstance(trend, str):
            labels[trend_key] = trend
        frames.append(f"{tf} {trend or 'n/a'} RSI {_fmt(rsi, 0)} %B {_fmt2(percent_b)}")
    trends = [t for t in labels.values() if t]
    agree = max((trends.count(t) for t in set(trends)), default=0)
    confidence = _AGREEMENT_CONFIDENCE.get(agree, 0.4 if trends else 0.2)
    content = (
        f"{ticker} at {_fmt2(price)}: 1h {_fmt2(figures['change_1h_pct'])} %, "
        f"4h {_fmt2(figures['return_4h_pct'])} %, 24h {_fmt2(figures['return_24h_pct'])} %, "
        f"z {_fmt2(figures['return_zscore'])}. " + "; ".join(frames) + "."
    )
    return content, confidence, figures, labels


def derivatives_report(sent: Mapping[str, Any], ticker: str) -> Built:
    """Funding, open interest, basis, liquidations, taker flow. Confidence: share available."""
    unavailable = sent.get("unavailable") or {}
    figures: dict[str, float | None] = {}
    funding = _num((sent.get("funding_rates") or {}).get(ticker))
    figures["funding_pct"] = None if funding is None else funding * 100
    missing = [] if figures["funding_pct"] is not None else ["funding_rates"]
    for name in _DERIVATIVE_FIELDS:
        found = _numbers(name, sent.get(name), ticker)
        figures.update(found)
        if not found:
            missing.append(name)
    signal = _num(sent.get("derivatives_signal"))
    figures["derivatives_signal"] = signal
    shown = [f"{k} {_fmt(v, 4)}" for k, v in figures.items() if v is not None]
    present = 1 + len(_DERIVATIVE_FIELDS) - len(missing)
    confidence = round(0.2 + 0.6 * present / (1 + len(_DERIVATIVE_FIELDS)), 3)
    content = f"{ticker} derivatives: " + (", ".join(shown) or "no figures") + "."
    if missing:
        reasons = sorted({str(unavailable.get(m, "no data")) for m in missing})
        content += f" Unavailable: {', '.join(missing)} ({'; '.join(reasons)[:200]})."
    return content, confidence, figures, {}


def sentiment_report(sent: Mapping[str, Any], ticker: str) -> Built:
    """Fear & Greed, trending coins, stablecoin supply. Confidence: share of the three present."""
    fng = sent.get("fear_greed") or {}
    figures: dict[str, float | None] = {"fear_greed": _num(fng.get("value"))}
    figures.update(_numbers("stablecoin_supply", sent.get("stablecoin_supply"), ticker))
    labels: dict[str, str] = {}
    if isinstance(fng.get("classification"), str):
        labels["fear_greed_class"] = fng["classification"]
    parts = [
        f"Fear & Greed {_fmt(figures['fear_greed'], 0)} ({labels.get('fear_greed_class', 'n/a')})"
    ]
    supply = [f"{k} {_fmt(v, 0)}" for k, v in figures.items() if k.startswith("stablecoin")]
    parts.append("stablecoin supply " + (", ".join(supply) if supply else "unavailable"))
    news = sent.get("news_summary")
    parts.append(
        f"trending: {news[:200]}" if isinstance(news, str) and news else "trending: unavailable"
    )
    present = sum(
        [figures["fear_greed"] is not None, bool(supply), isinstance(news, str) and bool(news)]
    )
    content = f"Market sentiment (for {ticker}): " + "; ".join(parts) + "."
    return content, round(0.2 + 0.2 * present, 3), figures, labels


def regime_labels(sent: Mapping[str, Any], ticker: str) -> dict[str, str] | None:
    """The labels ``regime_report`` gives its report (None: it gives no report). The regime
    analyst writes only when they change during a day, and most decisions ask only this."""
    regime = sent.get("regime")
    if not isinstance(regime, Mapping):
        return None
    crypto = str((regime.get("crypto") or {}).get(ticker, "unknown"))
    macro = str(regime.get("macro", "unavailable"))
    return {"crypto": crypto, "macro": macro, "combined": str(regime.get("combined", ""))}


def regime_report(
    sent: Mapping[str, Any], ticker: str, previous: Mapping[str, str]
) -> Built | None:
    """HMM regime, macro quadrant and their changes since ``previous`` (the last report's labels).
    Confidence: 0.7 with a known crypto regime, 0.3 without."""
    labels = regime_labels(sent, ticker)
    if labels is None:
        return None
    regime = sent["regime"]
    crypto, macro = labels["crypto"], labels["macro"]
    figures: dict[str, float | None] = {
        "crypto_exposure": _num((regime.get("crypto_exposure") or {}).get(ticker)),
        "exposure_scale": _num(regime.get("exposure_scale")),
    }
    changes = [
        f"{key} {previous[key]} -> {labels[key]}"
        for key in ("crypto", "macro")
        if key in previous and previous[key] != labels[key]
    ]
    content = (
        f"{ticker} regime {crypto}, macro {macro}, exposure scale "
        f"{_fmt(figures['exposure_scale'])}. "
        + (f"Changed: {'; '.join(changes)}." if changes else "No change since the last report.")
    )
    return content, 0.3 if crypto == "unknown" else 0.7, figures, labels
