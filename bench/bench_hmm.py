"""Crypto regime HMM: fit and predict time on 180 days of recorded 4h candles (1080 rows).

Fit = features + 3 state counts (2..4) x 3 seeded restarts, single-threaded BLAS (see
regime/crypto_hmm.py). Predict = features + forward-backward over the window, last row.
Run: ``.venv/bin/python bench/bench_hmm.py``.
"""

from __future__ import annotations

import statistics
import time

from market.recorded import load_klines, resample
from regime.crypto_hmm import CryptoRegimeModel

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
BARS_180_DAYS = 180 * 6
FIT_REPEATS = 3
PREDICT_REPEATS = 50


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def main() -> None:
    print(f"regime HMM on {BARS_180_DAYS} x 4h candles (180 days), median of repeats")
    for ticker in TICKERS:
        frame = resample(load_klines(ticker, "1h"), "1h", "4h").iloc[-BARS_180_DAYS:]
        model = CryptoRegimeModel()
        fit_ms: list[float] = []
        for _ in range(FIT_REPEATS):
            start = time.perf_counter()
            report = model.fit(frame)
            fit_ms.append(_ms(start))
        predict_ms: list[float] = []
        for _ in range(PREDICT_REPEATS):
            start = time.perf_counter()
            regime = model.predict(frame)
            predict_ms.append(_ms(start))
        print(
            f"  {ticker}: fit {statistics.median(fit_ms):7.1f} ms "
            f"(n_states={report.chosen_n_states}, rows={report.n_rows}, "
            f"warnings={len(report.warnings)}), "
            f"predict {statistics.median(predict_ms):5.2f} ms -> {regime.label.value} "
            f"(p={regime.probability:.3f})"
        )


if __name__ == "__main__":
    main()
