"""Warm-started regime refits against the full BIC search: time per fit and label agreement.

For each ticker, daily refits over ``--days`` days of the bundled recording (each on the last 180
days of 4h candles, as the tracker fits), twice: the full search (default settings) and warm start
(``warm_start=True``: EM from the previous model, at most ``warm_n_iter`` iterations, a full
search every ``full_search_every``-th fit). Between refits every 4h bar is labelled by ``predict``
with the model in force (as the daemon labels it at each 4h close). Prints the median wall time
per fit of each, and the agreement: the share of 4h bars given the same label.

Run: ``python -m bench hmm_warm [--days N] [--from YYYY-MM-DD]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime

import pandas as pd

from market.recorded import load_klines, resample
from regime.config import CryptoHmmConfig
from regime.crypto_hmm import CryptoRegimeModel

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
BARS_180_DAYS = 180 * 6
BARS_PER_DAY = 6
DEFAULT_DAYS = 30
DEFAULT_FROM = date(2025, 7, 1)


def _walk(
    frame: pd.DataFrame, first: int, days: int, config: CryptoHmmConfig
) -> tuple[list[float], list[str]]:
    """Daily refits from bar ``first``; (seconds per fit, the label of every 4h bar)."""
    model = CryptoRegimeModel(config)
    fit_secs: list[float] = []
    labels: list[str] = []
    for bar in range(first, first + days * BARS_PER_DAY):
        window = frame.iloc[max(0, bar - BARS_180_DAYS) : bar]
        if (bar - first) % BARS_PER_DAY == 0:
            started = time.perf_counter()
            model.fit(window)
            fit_secs.append(time.perf_counter() - started)
        labels.append(model.predict(window).label.value)
    return fit_secs, labels


def main(argv: Sequence[str] = ()) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench hmm_warm", description=__doc__)
    parser.add_argument("--days", type=int, default=DEFAULT_DAYS)
    parser.add_argument("--from", dest="start", type=date.fromisoformat, default=DEFAULT_FROM)
    parser.add_argument("--tickers", nargs="+", default=list(TICKERS))
    args = parser.parse_args(list(argv))
    cold_config = CryptoHmmConfig()
    warm_config = CryptoHmmConfig(warm_start=True)
    print(
        f"daily refits over {args.days} days from {args.start}: full search vs warm start "
        f"(warm_n_iter={warm_config.warm_n_iter}, full search every "
        f"{warm_config.full_search_every} fits)"
    )
    start_ms = int(
        datetime(args.start.year, args.start.month, args.start.day, tzinfo=UTC).timestamp() * 1000
    )
    all_same = all_bars = 0
    for ticker in args.tickers:
        frame = resample(load_klines(ticker, "1h"), "1h", "4h")
        first = int(frame.index.searchsorted(start_ms))
        cold_secs, cold_labels = _walk(frame, first, args.days, cold_config)
        warm_secs, warm_labels = _walk(frame, first, args.days, warm_config)
        same = sum(a == b for a, b in zip(cold_labels, warm_labels, strict=True))
        all_same += same
        all_bars += len(cold_labels)
        print(
            f"  {ticker}: fit median {statistics.median(cold_secs) * 1000:7.1f} ms full search, "
            f"{statistics.median(warm_secs) * 1000:7.1f} ms warm "
            f"(mean {statistics.fmean(cold_secs) * 1000:.1f} / {statistics.fmean(warm_secs) * 1000:.1f} ms); "
            f"same label on {same}/{len(cold_labels)} 4h bars ({100 * same / len(cold_labels):.1f} %)"
        )
    print(
        f"  agreement over all tickers: {100 * all_same / max(1, all_bars):.1f} % of {all_bars} bars"
    )


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
