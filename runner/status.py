"""The status line: what the daemon has seen, once per ``interval_secs`` of its clock."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from core.clock import Clock

log = logging.getLogger(__name__)

#: named figure -> function reading it (kept as callables so the reporter owns no component)
Figures = Mapping[str, Callable[[], object]]


class StatusReporter:
    def __init__(
        self,
        clock: Clock,
        interval_secs: float,
        figures: Figures,
        prices: Callable[[], Sequence[tuple[str, float | None]]],
    ) -> None:
        self._clock = clock
        self._interval_secs = interval_secs
        self._figures = figures
        self._prices = prices
        self._last_secs: float | None = None
        self.lines = 0

    def maybe_report(self) -> None:
        now_secs = self._clock.monotonic_secs()
        if self._last_secs is not None and now_secs - self._last_secs < self._interval_secs:
            return
        self._last_secs = now_secs
        log.info("%s", self.line())
        self.lines += 1

    def line(self) -> str:
        instant = datetime.fromtimestamp(self._clock.now_ms() / 1000, tz=UTC)
        parts = [f"status {instant:%Y-%m-%d %H:%M}Z"]
        parts += [f"{name}={read()}" for name, read in self._figures.items()]
        parts += [
            f"{ticker.split('/')[0]}={price:,.2f}" if price is not None else f"{ticker}=n/a"
            for ticker, price in self._prices()
        ]
        return " ".join(parts)
