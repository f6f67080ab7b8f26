"""A sweep's grid (``GRID.toml``) and the runs it expands to, each keyed by a hash of its inputs.

```toml
periods = [["2025-03-01", "2025-03-07"], ["2025-04-01", "2025-04-07"]]  # from, to (inclusive)
tickers = [["BTC/USDT", "ETH/USDT", "SOL/USDT"]]  # one or more ticker sets
deciders = ["fallback"]                             # and/or "claude", "debate"
memory = [true, false]
seeds = [42, 7]
data_dir = "data"                                   # optional (default: the configured one)
update_secs = 75                                    # optional (default: a quarter of the base bar)

[overrides.base]                                    # optional named config variants
[overrides.weekly_refit]
regime = { refit_every_secs = 604800 }
```

Runs = periods x tickers x deciders x memory x seeds x overrides. A run's key is 16 hex digits of
the SHA-256 of everything that shapes its journals: span, tickers, decider, memory, seed, update
interval, the data dir and the digest of its effective settings (``Settings.digest``: the config
after the override, secrets only as set / not set). Same inputs, same key, same folder: that is how
a sweep resumes.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.errors import RefuseToStartError
from runner.config import Settings, load_settings
from runner.replay.build import ReplayOptions

Decider = Literal["fallback", "claude", "debate"]


def _no_override() -> dict[str, dict[str, Any]]:
    return {"base": {}}


class Grid(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    periods: tuple[tuple[date, date], ...] = Field(min_length=1)
    tickers: tuple[tuple[str, ...], ...] = Field(min_length=1)
    deciders: tuple[Decider, ...] = ("fallback",)
    memory: tuple[bool, ...] = (True, False)
    seeds: tuple[int, ...] = (42,)
    data_dir: Path | None = None
    update_secs: float | None = None
    overrides: dict[str, dict[str, Any]] = Field(default_factory=_no_override)

    @field_validator("periods")
    @classmethod
    def _ordered(cls, periods: tuple[tuple[date, date], ...]) -> tuple[tuple[date, date], ...]:
        for first, last in periods:
            if last < first:
                raise ValueError(f"period {first} .. {last}: the end is before the start")
        return periods


class RunSpec(BaseModel):
    """One replay of the grid: everything it is asked, plus its key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    period: tuple[date, date]
    tickers: tuple[str, ...]
    decider: Decider
    memory: bool
    seed: int
    override: str
    update_interval_ms: int | None
    config_digest: str
    data_dir: str

    @property
    def cell(self) -> tuple[str, str, str]:
        """The table cell a run belongs to, memory aside (periods and seeds are its samples)."""
        return (",".join(self.tickers), self.decider, self.override)

    def options(self, runs_dir: Path) -> ReplayOptions:
        first, last = self.period
        return ReplayOptions(
            start_ms=_day_ms(first),
            end_ms=_day_ms(last + timedelta(days=1)),
            out_dir=runs_dir / self.key,
            tickers=self.tickers,
            decider=self.decider,
            memory=self.memory,
            seed=self.seed,
            update_interval_ms=self.update_interval_ms,
        )


def load_grid(path: Path) -> Grid:
    try:
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
    except FileNotFoundError:
        raise RefuseToStartError(f"grid file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise RefuseToStartError(f"grid file {path}: {exc}") from None
    try:
        return Grid.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise RefuseToStartError(f"grid file {path}: {problems}") from None


def variant_settings(base_overrides: Mapping[str, Any], grid: Grid) -> dict[str, Settings]:
    """Each named override applied to the configured settings (validated like the CLI's)."""
    variants = {}
    for name, override in grid.overrides.items():
        merged = _deep_merge(dict(base_overrides), override)
        if grid.data_dir is not None:
            merged["data_dir"] = grid.data_dir
        try:
            variants[name] = load_settings(merged)
        except RefuseToStartError as exc:
            raise RefuseToStartError(f"override {name!r}: {exc}") from None
    return variants


def expand(grid: Grid, variants: Mapping[str, Settings], default_data_dir: Path) -> list[RunSpec]:
    update_ms = None if grid.update_secs is None else round(grid.update_secs * 1000)
    runs = []
    for name, settings in variants.items():
        data_dir = str((settings.data_dir or default_data_dir).resolve())
        for period in grid.periods:
            for tickers in grid.tickers:
                for decider in grid.deciders:
                    for memory in grid.memory:
                        for seed in grid.seeds:
                            fields: dict[str, Any] = {
                                "period": period,
                                "tickers": tickers,
                                "decider": decider,
                                "memory": memory,
                                "seed": seed,
                                "override": name,
                                "update_interval_ms": update_ms,
                                "config_digest": settings.digest(),
                                "data_dir": data_dir,
                            }
                            runs.append(RunSpec(key=run_key(fields), **fields))
    return runs


def run_key(fields: Mapping[str, Any]) -> str:
    canonical = json.dumps(dict(fields), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


__all__ = ["Grid", "RunSpec", "expand", "load_grid", "run_key", "variant_settings"]
