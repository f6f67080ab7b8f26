"""Macro sources: FRED's web API (live) and a snapshot of FRED CSVs (replay), behind one port.

``FredSource`` asks ``{base_url}/fred/series/observations?series_id=..&api_key=..&file_type=json``
for the two series of ``regime.macro.MacroRule`` and classifies them. It never raises: no key, a
network error, a timeout, an HTTP error or a malformed body gives an UNAVAILABLE regime whose reason
says which (the key itself is never in a reason or a log line). Answers are cached on the injected
clock: a classification for ``cache_ttl_secs`` (24 h: the series are monthly), a failure for
``failure_ttl_secs`` (1 h, so a FRED outage is not hammered). The HTTP timeout is real time even
under a simulated clock, because the socket is real.

``FredSnapshotSource`` reads ``<directory>/<SERIES_ID>.csv`` in FRED's download format (header
``observation_date,<SERIES_ID>``, or ``DATE,<SERIES_ID>`` in older downloads; ``.`` or empty for a
missing value). No snapshot ships with vigil: the bundled data has no FRED series, so replay
reports the macro regime as unavailable unless someone supplies real downloads.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Protocol

import aiohttp
import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from core.clock import Clock
from core.errors import RetryableError
from market.data_file import open_data_csv
from regime.config import FRED_BASE_URL, RegimeConfig
from regime.macro import MacroDataError, MacroRegime, MacroRule, classify_macro

log = logging.getLogger(__name__)

OBSERVATIONS_PATH = "/fred/series/observations"
NO_KEY_REASON = "no FRED API key configured"


class MacroSource(Protocol):
    async def current(self) -> MacroRegime: ...


class FredError(RetryableError):
    """FRED did not give usable observations this time."""


class _Observation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    date: date
    value: str  # FRED sends numbers as strings, "." for a missing value


class _ObservationsResponse(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    observations: list[_Observation]


def parse_observations(body: bytes, series_id: str) -> pd.Series:
    """FRED's JSON observations -> float series indexed by observation date (missing -> NaN)."""
    try:
        payload = _ObservationsResponse.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "<body>"
        raise FredError(
            f"malformed FRED response for {series_id}: {where}: {first['msg']}"
        ) from None
    values: list[float] = []
    for item in payload.observations:
        try:
            values.append(np.nan if item.value.strip() in {".", ""} else float(item.value))
        except ValueError:
            raise FredError(
                f"malformed FRED response for {series_id}: value {item.value[:20]!r} "
                f"on {item.date} is not a number"
            ) from None
    index = pd.DatetimeIndex([pd.Timestamp(item.date) for item in payload.observations])
    return pd.Series(values, index=index, dtype=np.float64, name=series_id)


class FredSource:
    def __init__(
        self,
        clock: Clock,
        *,
        api_key: SecretStr | None,
        base_url: str = FRED_BASE_URL,
        timeout_secs: float = 10.0,
        cache_ttl_secs: float = 86_400.0,
        failure_ttl_secs: float = 3_600.0,
        rule: MacroRule | None = None,
    ) -> None:
        if timeout_secs <= 0:
            raise ValueError(f"timeout_secs must be > 0, got {timeout_secs}")
        self._clock = clock
        self._api_key = api_key
        self._url = base_url.rstrip("/") + OBSERVATIONS_PATH
        self._timeout_secs = timeout_secs
        self._cache_ttl_secs = cache_ttl_secs
        self._failure_ttl_secs = failure_ttl_secs
        self.rule = rule or MacroRule()
        self._cached: MacroRegime | None = None
        self._expires_secs = 0.0
        self._lock = asyncio.Lock()

    async def current(self) -> MacroRegime:
        """The macro regime, from the cache while fresh; never raises for FRED's problems."""
        if self._api_key is None:
            return MacroRegime.unavailable(NO_KEY_REASON, source="fred")
        async with self._lock:  # concurrent callers share one fetch
            if self._cached is not None and self._clock.monotonic_secs() < self._expires_secs:
                return self._cached
            regime = await self._fetch_and_classify(self._api_key)
            available = regime.reason is None
            ttl = self._cache_ttl_secs if available else self._failure_ttl_secs
            self._cached, self._expires_secs = regime, self._clock.monotonic_secs() + ttl
            return regime

    async def _fetch_and_classify(self, api_key: SecretStr) -> MacroRegime:
        now_ms = self._clock.now_ms()
        start = _months_before(now_ms, self.rule.months_needed)
        timeout = aiohttp.ClientTimeout(total=self._timeout_secs)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                growth = await self._series(session, api_key, self.rule.growth_series, start)
                inflation = await self._series(session, api_key, self.rule.inflation_series, start)
        except FredError as exc:
            reason = _redact(str(exc), api_key)
            log.warning("macro regime unavailable: %s", reason)
            return MacroRegime.unavailable(reason, source="fred")
        except Exception as exc:  # a bug here must not take the decision path down with it
            log.exception("macro regime unavailable: unexpected error fetching FRED")
            return MacroRegime.unavailable(
                f"unexpected error fetching FRED: {type(exc).__name__}", source="fred"
            )
        regime = classify_macro(growth, inflation, now_ms=now_ms, source="fred", rule=self.rule)
        if regime.reason is not None:
            log.warning("macro regime unavailable: %s", regime.reason)
        return regime

    async def _series(
        self, session: aiohttp.ClientSession, api_key: SecretStr, series_id: str, start: date
    ) -> pd.Series:
        params = {
            "series_id": series_id,
            "api_key": api_key.get_secret_value(),
            "file_type": "json",
            "observation_start": start.isoformat(),
        }
        try:
            async with session.get(self._url, params=params) as response:
                status = response.status
                body = await response.read()
        except TimeoutError:
            raise FredError(f"FRED {series_id}: no answer within {self._timeout_secs} s") from None
        except aiohttp.ClientError as exc:
            raise FredError(
                f"FRED {series_id}: request failed: {type(exc).__name__}: {exc}"
            ) from None
        if status != 200:
            raise FredError(f"FRED {series_id}: HTTP {status}: {_error_message(body)}")
        return parse_observations(body, series_id)


class FredSnapshotSource:
    """The macro regime from real FRED downloads on disk, as of the clock's now (replay)."""

    def __init__(self, clock: Clock, directory: Path, rule: MacroRule | None = None) -> None:
        self._clock = clock
        self._directory = directory
        self.rule = rule or MacroRule()
        self._series: tuple[pd.Series, pd.Series] | None = None  # files are read once

    async def current(self) -> MacroRegime:
        if self._series is None:
            try:
                self._series = await asyncio.to_thread(self._load)
            except MacroDataError as exc:
                log.warning("macro regime unavailable: %s", exc)
                return MacroRegime.unavailable(str(exc), source="snapshot")
        growth, inflation = self._series
        return classify_macro(
            growth, inflation, now_ms=self._clock.now_ms(), source="snapshot", rule=self.rule
        )

    def _load(self) -> tuple[pd.Series, pd.Series]:
        return (
            load_snapshot_series(self._directory, self.rule.growth_series),
            load_snapshot_series(self._directory, self.rule.inflation_series),
        )


def load_snapshot_series(directory: Path, series_id: str) -> pd.Series:
    """``<directory>/<series_id>.csv`` (FRED download format) -> float series by date."""
    path = directory / f"{series_id}.csv"
    if not path.is_file():
        raise MacroDataError(f"no FRED snapshot for {series_id}: {path} missing")
    try:
        with open_data_csv(path) as source:  # read whole, one of a gigabyte took it all
            frame = pd.read_csv(source, dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise MacroDataError(f"cannot read FRED snapshot {path}: {exc}") from None
    date_column = next((c for c in ("observation_date", "DATE") if c in frame.columns), None)
    if date_column is None or series_id not in frame.columns:
        raise MacroDataError(
            f"FRED snapshot {path}: expected columns observation_date,{series_id}; "
            f"got {list(frame.columns)}"
        )
    raw = frame[series_id].str.strip()
    values = pd.to_numeric(raw.where(~raw.isin([".", ""])), errors="coerce")
    bad = values.isna() & ~raw.isin([".", ""])
    if bad.any():
        raise MacroDataError(f"FRED snapshot {path}: non-numeric value {raw[bad].iloc[0]!r}")
    try:
        index = pd.DatetimeIndex(pd.to_datetime(frame[date_column], format="%Y-%m-%d"))
    except ValueError as exc:
        raise MacroDataError(f"FRED snapshot {path}: bad date: {exc}") from None
    return pd.Series(values.to_numpy(dtype=np.float64), index=index, name=series_id)


def build_macro_source(
    clock: Clock, config: RegimeConfig, api_key: SecretStr | None
) -> MacroSource:
    """A FRED key wins; without one a snapshot directory serves; otherwise "no key" unavailable."""
    if api_key is None and config.fred_snapshot_dir is not None:
        return FredSnapshotSource(clock, config.fred_snapshot_dir, config.macro_rule)
    return FredSource(
        clock,
        api_key=api_key,
        base_url=config.fred_base_url,
        timeout_secs=config.fred_timeout_secs,
        cache_ttl_secs=config.fred_cache_ttl_secs,
        failure_ttl_secs=config.fred_failure_ttl_secs,
        rule=config.macro_rule,
    )


def _months_before(now_ms: int, months: int) -> date:
    now = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    total = now.year * 12 + (now.month - 1) - months
    return date(total // 12, total % 12 + 1, 1)


def _error_message(body: bytes) -> str:
    """FRED's ``{"error_code": 400, "error_message": "..."}``, or the start of the body."""
    try:
        message = _FredErrorBody.model_validate_json(body).error_message
    except ValidationError:
        message = body[:200].decode("utf-8", errors="replace").strip() or "(empty body)"
    return message


class _FredErrorBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    error_message: str


def _redact(text: str, api_key: SecretStr) -> str:
    secret = api_key.get_secret_value()
    return text.replace(secret, "***") if secret else text


__all__ = [
    "FRED_BASE_URL",
    "NO_KEY_REASON",
    "FredError",
    "FredSnapshotSource",
    "FredSource",
    "MacroSource",
    "build_macro_source",
    "load_snapshot_series",
    "parse_observations",
]
