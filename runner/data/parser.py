"""``vigil data``'s arguments, apart from the commands: every ``vigil`` command builds the whole
parser (the Docker health check every 30 s among them), and the commands import pandas and ccxt."""

from __future__ import annotations

from typing import Any

from market.timeframes import RECORDED_INTERVALS
from runner.cli_text import path_argument, pause_secs, usdt_ticker


def add_data_parser(sub: Any) -> None:
    data = sub.add_parser("data", help="recorded market data: fetch, import, check")
    data_sub = data.add_subparsers(dest="data_command", required=True)

    fetch = data_sub.add_parser(
        "fetch", help="download klines (and funding) through ccxt into a data dir, resumable"
    )
    fetch.add_argument(
        "--tickers", nargs="+", type=usdt_ticker, required=True, help="e.g. BTC/USDT ETH/USDT"
    )
    fetch.add_argument("--interval", default="5m", choices=RECORDED_INTERVALS)
    fetch.add_argument("--from", dest="fetch_from", required=True, help="first day, UTC")
    fetch.add_argument("--to", dest="fetch_to", required=True, help="last day, inclusive")
    fetch.add_argument("--out", type=path_argument, required=True, help="the data dir to fill")
    fetch.add_argument("--no-funding", action="store_true", help="klines only")
    fetch.add_argument(
        "--exchange-url",
        help="a Binance-compatible REST base URL instead of Binance (e.g. `vigil sim`'s)",
    )
    fetch.add_argument(
        "--min-interval-secs",
        type=pause_secs,
        default=0.0,
        help="pause between pages on top of ccxt's rate limiter (0 .. 3600)",
    )

    imp = data_sub.add_parser(
        "import", help="Binance data-archive kline files (zip or CSV) into a data dir"
    )
    imp.add_argument("files", nargs="+", type=path_argument, help="e.g. BTCUSDT-5m-2025-03.zip")
    imp.add_argument("--out", type=path_argument, required=True, help="the data dir to fill")

    check = data_sub.add_parser("check", help="spans, gaps, duplicates, misaligned bars per file")
    check.add_argument("data_dir", type=path_argument)
    check.add_argument("--json", action="store_true", help="machine-readable output")


__all__ = ["add_data_parser"]
