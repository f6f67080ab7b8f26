"""Where wake conditions read metric values: the ``MetricSource`` port and the ``MetricBoard``.

The gate only asks ``get(name)`` for the current value, ``None`` when unavailable. A plain
``dict[str, float]`` is a ``MetricSource``; in the daemon the ``MetricBoard`` is, fed with every
tick's ``TickFeatures`` (per-ticker price, changes, z-score, volume ratio) and with derivatives and
sentiment values as they arrive. It only accepts names from the metric table, so a typo in a feeder
fails loudly instead of leaving a condition silently unavailable forever.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from gate.conditions import METRICS, TICK_METRICS, MetricSpec, metric_prefix
from market.features import TickFeatures

log = logging.getLogger(__name__)

#: the TickFeatures fields ``update_features`` reads, in the order it unpacks their metric names
_FEATURE_FIELDS = (
    "price",
    "change_1h_pct",
    "change_4h_pct",
    "change_24h_pct",
    "return_zscore",
    "volume_ratio",
)
_SUFFIX_BY_FIELD = {field: suffix for suffix, field, *_ in TICK_METRICS}


class MetricSource(Protocol):
    """The current value of a metric, or None when it is unavailable."""

    def get(self, name: str, /) -> float | None: ...


class MetricBoard:
    """The latest value of each metric in ``registry``; a ``MetricSource``.

    ``get`` is the underlying dict's own ``get`` (the gate calls it per condition per tick).
    """

    def __init__(self, registry: Mapping[str, MetricSpec] = METRICS) -> None:
        self._registry = registry
        self._values: dict[str, float] = {}
        self.get: Callable[[str], float | None] = self._values.get
        # ticker -> what its features feed (None: a ticker outside the table); tickers whose
        # metric names are the same share one feed
        self._feeds: dict[str, _Feed | None] = {}
        self._feeds_by_names: dict[tuple[str, ...], _Feed] = {}
        # the metrics ``update`` applied last, while applying them again would change nothing:
        # forgotten by ``clear``, by a new ticker's feed, and when they name a tick metric (which
        # ``update_features`` writes); the derivatives monitor sends the same ones poll after poll
        self._applied: dict[str, float | None] | None = None
        self._tick_names: set[str] = set()

    def update_features(self, features: TickFeatures) -> None:
        """Take a tick's features; a feature that is None makes its metric unavailable."""
        feed = self._feeds.get(features.ticker, _UNSEEN)
        if feed is _UNSEEN:
            feed = self._feed_for(features.ticker)
        if feed is None or feed.features is features:
            return
        feed.features = features
        price, c1h, c4h, c24h, zscore, volume = feed.names
        values = self._values
        values[price] = features.price
        _put(values, c1h, features.change_1h_pct)
        _put(values, c4h, features.change_4h_pct)
        _put(values, c24h, features.change_24h_pct)
        _put(values, zscore, features.return_zscore)
        _put(values, volume, features.volume_ratio)

    def update(self, values: Mapping[str, float | None]) -> None:
        """Set several metrics (derivatives, sentiment); None or NaN makes one unavailable.

        Raises ``ValueError`` naming every metric not in the table (nothing is applied then) and
        ``TypeError`` for a value that is not a number.
        """
        applied = self._applied
        if applied is not None and _same_metrics(values, applied):
            return  # checked and written already, and nothing has written these names since
        self._applied = None
        unknown = sorted(name for name in values if name not in self._registry)
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; known: {sorted(self._registry)}")
        for name, value in values.items():
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise TypeError(f"metric {name} must be a number, got {type(value).__name__}")
        self._forget_fed()
        for name, value in values.items():
            _put(self._values, name, None if value is None else float(value))
        if self._tick_names.isdisjoint(values):
            self._applied = dict(values)

    def clear(self, name: str) -> None:
        self._applied = None
        self._forget_fed()
        self._values.pop(name, None)

    def _forget_fed(self) -> None:
        for feed in self._feeds_by_names.values():
            feed.features = None

    def snapshot(self) -> dict[str, float]:
        """A copy of every available value (for reports and journals)."""
        return dict(self._values)

    def _feed_for(self, ticker: str) -> _Feed | None:
        prefix = metric_prefix(ticker)
        names = tuple(f"{prefix}_{_SUFFIX_BY_FIELD[field]}" for field in _FEATURE_FIELDS)
        missing = [name for name in names if name not in self._registry]
        if missing:
            log.warning(
                "ticks of %s feed no wake-condition metrics: %s are not in the metric table",
                ticker,
                missing,
            )
            self._feeds[ticker] = None
            return None
        feed = self._feeds_by_names.get(names)
        if feed is None:
            feed = self._feeds_by_names[names] = _Feed(names)
            self._tick_names.update(names)
            self._applied = None  # it may have named these
        self._feeds[ticker] = feed
        return feed


class _Feed:
    """One set of tick metric names and the features written to them last: every stream of a
    ticker hands over the same cached object at one instant, and writing it again would change
    nothing unless ``update``/``clear`` touched the values since (they forget it). Held per
    ticker, so a tick finds it without hashing the names."""

    __slots__ = ("features", "names")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.features: TickFeatures | None = None


_UNSEEN: Final = _Feed(())


def _same_metrics(values: Mapping[str, float | None], applied: dict[str, float | None]) -> bool:
    """The same names in the same order with the same values: of the same type (a bool is
    refused where an int was taken) and equal to the sign (-0.0 is written as such); a NaN is
    never the same, so it takes the full update."""
    if len(values) != len(applied):
        return False
    for (name, value), (was_name, was) in zip(values.items(), applied.items(), strict=True):
        if name != was_name:
            return False
        if value is not was and (
            type(value) is not type(was)
            or value != was
            or math.copysign(1.0, value) != math.copysign(1.0, was)  # type: ignore[arg-type]
        ):
            return False
    return True


def _put(values: dict[str, float], name: str, value: float | None) -> None:
    if value is None or math.isnan(value):
        values.pop(name, None)
    else:
        values[name] = value


__all__ = ["MetricBoard", "MetricSource"]
