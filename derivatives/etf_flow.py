"""US spot-BTC-ETF daily net flows from Farside Investors' public table (no key).

Farside publishes the flows of every US spot bitcoin ETF as an HTML table
(https://farside.co.uk/bitcoin-etf-flow-all-data/): one row per trading day, the first cell a
date like ``11 Jan 2024``, then one cell per fund in US$ millions (outflows in parentheses,
``(95.1)``; ``-`` where a fund has not reported or did not exist) and a last ``Total`` column; the
header row names the funds' tickers (IBIT, FBTC, ..., GBTC, BTC, Total); summary rows (Total,
Average, Maximum, Minimum) close the table. No public JSON or CSV endpoint without a key is known
to us (SoSoValue and CoinGlass need keys), so this reads the HTML with the standard library's
parser. The page sits behind a CDN that may refuse scripted clients: such an answer (403, a
challenge page without the table) leaves the field null with that reason, never a guess.

The value: the latest day whose Total is reported, its net flow, the flow per fund (funds with
a number only) and the sum of the last five reported days. A latest day older than
``MAX_AGE_DAYS`` is unavailable (the page stopped updating), not served as today's flow.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any, Final

from core.clock import DAY_MS
from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.config import FARSIDE_BTC_URL
from derivatives.http import get_text

ETF_WHAT: Final = "BTC ETF flow (Farside)"
SOURCE_NAME: Final = "Farside Investors (farside.co.uk), US$ millions"
MAX_AGE_DAYS: Final = 7  # a long weekend plus a holiday is 4; a week means the page is stale
SUM_DAYS: Final = 5
#: US$ 1 trillion in a day: the largest day of all the funds so far is about US$ 1.4 billion
MAX_FLOW_USD_MILLIONS: Final = 1e6


class _TableCells(HTMLParser):
    """Every table row's cells as text (``th`` and ``td`` alike), in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _number(text: str) -> float | None:
    """``123.4`` / ``(95.1)`` (an outflow) / ``-`` or empty (none reported) in US$ millions;
    ``SourceFailedError`` for a number that is no day's flow (see ``MAX_FLOW_USD_MILLIONS``)."""
    cleaned = text.replace(",", "").replace("$", "").strip()
    if cleaned in ("", "-", "\u2013", "\u2014"):  # a hyphen, or an en / em dash
        return None
    negative = cleaned.startswith("(") and cleaned.endswith(")")
    try:
        value = float(cleaned.strip("()"))
    except ValueError:
        return None
    # float() reads "NaN", "inf" and "1e400" too: a figure like that is a broken page, not a flow
    if not abs(value) <= MAX_FLOW_USD_MILLIONS:
        raise SourceFailedError(f"{ETF_WHAT}: malformed page: a figure of {text[:40]!r}")
    return -value if negative else value


def _day(text: str) -> datetime | None:
    try:
        return datetime.strptime(text.strip(), "%d %b %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def etf_flow_from_html(page: str, now_ms: int) -> dict[str, Any]:
    """The ``etf_flow`` value from Farside's page (see the module docstring)."""
    parser = _TableCells()
    parser.feed(page)
    header: list[str] | None = None
    days: list[tuple[datetime, float, dict[str, float]]] = []
    for row in parser.rows:
        day = _day(row[0]) if row else None
        if day is None:
            # the fund tickers' row: the last row ending in "Total" above the first day
            if not days and len(row) > 2 and row[-1].lower() == "total":
                header = row
            continue
        total = _number(row[-1])
        if header is None or len(row) != len(header) or total is None:
            continue  # no header yet, a row of another shape, or a day not reported yet
        values = map(_number, row[1:-1])
        by_fund = {f: v for f, v in zip(header[1:-1], values, strict=True) if v is not None}
        days.append((day, total, by_fund))
    if header is None:
        raise SourceFailedError(f"{ETF_WHAT}: malformed page: no flow table with a Total column")
    if not days:
        raise SourceNotAvailableError(f"{ETF_WHAT}: the table has no reported day")
    days.sort(key=lambda d: d[0])
    latest, total, by_fund = days[-1]
    age_days = (now_ms - int(latest.timestamp() * 1000)) / DAY_MS
    if age_days > MAX_AGE_DAYS:
        raise SourceNotAvailableError(
            f"{ETF_WHAT}: the latest reported day is {latest.date()}, {age_days:.0f} days ago"
        )
    if age_days < 0:
        raise SourceFailedError(f"{ETF_WHAT}: the latest row ({latest.date()}) is after now")
    return {
        "date": latest.date().isoformat(),
        "net_flow_usd_millions": total,
        "by_fund_usd_millions": by_fund,
        f"sum_{SUM_DAYS}d_usd_millions": sum(t for _, t, _ in days[-SUM_DAYS:]),
        "source": SOURCE_NAME,
    }


async def fetch_etf_flow(url: str | None, now_ms: int) -> dict[str, Any]:
    """GET Farside's page at ``url`` and read its latest reported day."""
    if url is None:
        raise SourceNotAvailableError(f"{ETF_WHAT}: no URL configured (source disabled)")
    page = await get_text(url, {}, what=ETF_WHAT)
    # Python's HTML parser reads ~1 MiB a second: on the loop, a large page (up to the body cap)
    # would stall every other task for seconds
    return await asyncio.to_thread(etf_flow_from_html, page, now_ms)


__all__ = ["ETF_WHAT", "FARSIDE_BTC_URL", "etf_flow_from_html", "fetch_etf_flow"]
