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

Runs = periods x tickers x deciders x memory x seeds x overrides, at most ``MAX_RUNS``. Every list
needs an entry and holds each at most once (a repeated one would be the same run, counted twice in
the report); seeds are 0 .. 2^32-1, days 2010 .. 2099, and ``update_secs`` divides a base bar, as
``vigil replay`` asks. A grid file that is not UTF-8 TOML within tomllib's limits is refused. A run's key is 16 hex digits of
the SHA-256 of everything that shapes its journals: span, tickers, decider, memory, seed, update
interval, the data dir and the digest of its effective settings (``Settings.digest``: the config
after the override, secrets only as set / not set). Same inputs, same key, same folder: that is how
a sweep resumes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from math import prod
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from core.config_path import ConfigPath, require_folder
from core.errors import RefuseToStartError
from market.recorded import (
    DataUnavailableError,
    MalformedDataError,
    base_interval,
    interval_ms,
    load_fear_greed,
    load_funding,
    load_klines,
)
from regime.config import SEED_MAX
from runner.config import Settings, load_settings
from runner.config_file import read_toml_file
from runner.replay.args import check_day, update_ms_from_secs
from runner.replay.build import ReplayOptions, replay_settings

Decider = Literal["fallback", "claude", "debate"]
#: a run is a whole replay (minutes each): a grid beyond this is a typo, not an experiment
MAX_RUNS = 10_000
_LISTS = ("periods", "tickers", "deciders", "memory", "seeds")


def _no_override() -> dict[str, dict[str, Any]]:
    return {"base": {}}


class Grid(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    periods: tuple[tuple[date, date], ...] = Field(min_length=1)
    tickers: tuple[Annotated[tuple[str, ...], Field(min_length=1)], ...] = Field(min_length=1)
    deciders: tuple[Decider, ...] = Field(("fallback",), min_length=1)
    memory: tuple[StrictBool, ...] = Field((True, False), min_length=1)
    seeds: tuple[Annotated[StrictInt, Field(ge=0, le=SEED_MAX)], ...] = Field((42,), min_length=1)
    data_dir: ConfigPath | None = None  # "" was Path("."): the working directory
    update_secs: StrictFloat | None = None  # true was 1 s and "75" 75 s
    overrides: dict[str, dict[str, Any]] = Field(default_factory=_no_override, min_length=1)

    @field_validator("periods")
    @classmethod
    def _ordered(cls, periods: tuple[tuple[date, date], ...]) -> tuple[tuple[date, date], ...]:
        for first, last in periods:
            check_day(first, "period start")
            check_day(last, "period end")
            if last < first:
                raise ValueError(f"period {first} .. {last}: the end is before the start")
        return periods

    @field_validator("tickers")
    @classmethod
    def _distinct_tickers(cls, sets: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
        for tickers in sets:
            _refuse_repeats(tickers, "ticker set")
        return sets

    @field_validator("update_secs")
    @classmethod
    def _divides_a_bar(cls, secs: float | None) -> float | None:
        update_ms_from_secs(secs, "update_secs")
        return secs

    @model_validator(mode="after")
    def _distinct_and_bounded(self) -> Grid:
        runs = prod(len(getattr(self, name)) for name in _LISTS) * len(self.overrides)
        if runs > MAX_RUNS:
            raise ValueError(f"the grid expands to {runs:,} runs; at most {MAX_RUNS:,}")
        for name in _LISTS:
            _refuse_repeats(getattr(self, name), name)
        return self


def _refuse_repeats(values: tuple[Any, ...], name: str) -> None:
    seen: set[Any] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{name} lists {value!r} more than once")
        seen.add(value)


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


#: a grid is lines of lists: a sparse file of gigabytes given as one was read whole, then decoded
GRID_FILE_MAX_BYTES = 1 << 20


def load_grid(path: Path) -> Grid:
    raw = read_toml_file(path, "grid file", max_bytes=GRID_FILE_MAX_BYTES)
    try:
        return Grid.model_validate(raw)
    except ValidationError as exc:
        raise RefuseToStartError(f"grid file {path}: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    errors = exc.errors()
    locs = [err["loc"] for err in errors]
    lines = []
    for err in errors:
        loc = err["loc"]
        # a list whose one bad item was dropped is then also "too short": the item says it better
        if err["type"] == "too_short" and any(o[: len(loc)] == loc and o != loc for o in locs):
            continue
        where = ".".join(str(part) for part in loc)
        message = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {message}" if where else message)
    return "; ".join(lines)


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


def check_runs(specs: list[RunSpec], variants: Mapping[str, Settings], runs_dir: Path) -> None:
    """Refuse now what would fail every such run on the cluster, one by one: a data dir that is not
    there or holds no readable base bars, a span its recording does not cover, a ticker not
    configured, a model decider without its key or budget."""
    spans: dict[tuple[str, tuple[str, ...]], dict[str, tuple[int, int]]] = {}
    for spec in specs:
        where = f"run {','.join(spec.tickers)} {spec.decider} override {spec.override!r}"
        try:
            replay_settings(variants[spec.override], spec.options(runs_dir))
        except RefuseToStartError as exc:
            raise RefuseToStartError(f"{where}: {exc}") from None
        key = (spec.data_dir, spec.tickers)
        if key not in spans:
            spans[key] = _recorded_spans(Path(spec.data_dir), spec.tickers)
        options = spec.options(runs_dir)
        for ticker, (first_ms, end_ms) in spans[key].items():
            if options.start_ms < first_ms or options.end_ms > end_ms:
                raise RefuseToStartError(
                    f"period {spec.period[0]} .. {spec.period[1]}: {ticker}'s recording in "
                    f"{spec.data_dir} covers {_day(first_ms)} .. {_day(end_ms)} (end exclusive)"
                )


def _recorded_spans(data_dir: Path, tickers: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Each ticker's base bars as the replay will pick them: first open .. last close (exclusive).
    The replay's own check is on the same bars, so a span outside these fails every run."""
    require_folder(data_dir, "data dir")
    try:
        interval = base_interval(tickers, data_dir)
        frames = {t: load_klines(t, interval, data_dir) for t in tickers}
    except (DataUnavailableError, MalformedDataError) as exc:
        raise RefuseToStartError(f"recorded data: {exc}") from None
    # the optional series the replay reads as it does (absent: reported unavailable): a malformed
    # one passed here and failed every run of the sweep once the cluster had started
    for ticker in tickers:
        _optional(functools.partial(load_funding, ticker, data_dir))
    _optional(functools.partial(load_fear_greed, data_dir))
    bar_ms = interval_ms(interval)
    return {
        t: (int(f.index[0]), int(f.index[-1]) + bar_ms) if len(f) else (0, 0)
        for t, f in frames.items()
    }


def _optional(load: Callable[[], object]) -> None:
    try:
        load()
    except DataUnavailableError:
        return
    except MalformedDataError as exc:
        raise RefuseToStartError(f"malformed recorded data: {exc}") from None


def _day(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


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


__all__ = [
    "MAX_RUNS",
    "Grid",
    "RunSpec",
    "check_runs",
    "expand",
    "load_grid",
    "run_key",
    "variant_settings",
]
