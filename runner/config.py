"""The daemon's one settings model: typed, frozen, read from ``vigil.toml`` and ``VIGIL_*`` variables.

Precedence (highest first): explicit overrides (CLI flags), environment (``VIGIL_SECTION__FIELD``),
secret files (``VIGIL_SECRETS_DIR``, default ``/run/secrets`` when present), ``vigil.toml``, defaults.
Unknown keys and wrong types refuse to start with a message naming the field and the bad value.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from agent.config import AgentConfig
from agent.prompt_budgets import PromptBudgets
from api.config import ApiConfig, token_problem
from api.notify.config import NotifyConfig
from core.config_path import ConfigPath, require_folder
from core.errors import RefuseToStartError
from derivatives.config import DerivativesConfig
from gate.gate import GateConfig
from market.guard import FrameGuardConfig
from market.timeframes import QUOTE
from memory.config import MemoryConfig
from memory.context_config import ContextConfig
from regime.config import RegimeConfig
from runner.config_bounds import refuse_unusable_numbers
from runner.config_file import read_toml_file, refuse_names_spelt_twice
from runner.logging_setup import LogConfig
from state.rotation import JournalRotationConfig
from tracker.config import TrackerConfig

DEFAULT_CONFIG_FILE = Path("vigil.toml")
#: the default state dir, relative to the working directory like ``vigil.toml``: next to the config
#: people run with, visible, one folder per deployment (``--state-dir`` / VIGIL_STATE_DIR move it;
#: the container uses /data). Not ``state/``: that is vigil's own source package.
STATE_DIR = Path("vigil-state")
#: a full vigil.toml is a few kilobytes: a log or a sparse file of gigabytes given as --config was
#: read whole (3 GB: 6.3 GB resident, 15 s) before it was refused as not TOML
CONFIG_FILE_MAX_BYTES = 1 << 20
#: a key or token is about a hundred characters (the key files' bound, agent_wiring's and the broker's)
SECRET_FILE_MAX_BYTES = 64 * 1024


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


#: a USDⓈ-M perpetual as vigil names it (``market.timeframes.to_binance_symbol`` and back)
_TICKER = re.compile(rf"[A-Z0-9]+/{QUOTE}")


def is_usdt_perpetual(ticker: str) -> bool:
    """A ticker as Binance USDⓈ-M names its perpetuals: ``BASE/USDT``, capitals and digits."""
    return _TICKER.fullmatch(ticker) is not None


#: Binance pushes every kline stream every 250 ms
BINANCE_UPDATE_MS = 250


def _each_once(value: tuple[str, ...]) -> tuple[str, ...]:
    repeated = sorted({t for t in value if value.count(t) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} listed more than once")
    return value


class MarketConfig(_Section):
    source: Literal["sim", "binance"] = "binance"
    tickers: tuple[str, ...] = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
    timeframes: tuple[Literal["15m", "1h", "4h"], ...] = ("15m", "1h", "4h")
    binance_ws_url: str = "wss://fstream.binance.com/market/stream"
    binance_rest_url: str = "https://fapi.binance.com"
    silence_timeout_secs: float = Field(30.0, gt=0)
    rotate_after_secs: float = Field(23.5 * 3600, gt=0)
    reconnect_base_secs: float = Field(1.0, gt=0)
    reconnect_cap_secs: float = Field(60.0, gt=0)
    history_days: int = Field(180, ge=1, le=3650)
    # what a kline frame must satisfy to be taken (market.guard): see the README's Configuration
    max_clock_skew_secs: float = Field(300.0, gt=0)  # E and t at most this far past the clock
    max_frame_age_secs: float = Field(6 * 3600.0, gt=0)  # E at most this far behind the clock
    max_price_move_frac: float = Field(0.3, gt=0)  # vs the last good price of the ticker
    max_candle_range_frac: float = Field(1.0, gt=0)  # high / low - 1 of one candle
    reanchor_after_secs: float = Field(60.0, ge=0)  # a new level held this long is the market

    @field_validator("tickers")
    @classmethod
    def _usdt_perpetuals(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """Checked here: unchecked, no ticker, an empty one or a repeated one were tracebacks deep
        in start-up, and ``btc/usdt`` ran with streams the exchange refused (Binance USDⓈ-M
        names its perpetuals ``BASE/USDT``, capitals and digits)."""
        if not value:
            raise ValueError("at least one ticker is needed")
        for ticker in value:
            if not is_usdt_perpetual(ticker):
                raise ValueError(f"{ticker!r} is not BASE/{QUOTE} in capitals, e.g. BTC/{QUOTE}")
        return _each_once(value)

    @field_validator("timeframes")
    @classmethod
    def _some_timeframes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        """``timeframes = []`` was taken: a daemon with no kline stream to listen to."""
        if not value:
            raise ValueError("at least one timeframe is needed (15m, 1h, 4h)")
        return _each_once(value)

    def guard(self, *, feed_update_ms: int = BINANCE_UPDATE_MS) -> FrameGuardConfig:
        """``feed_update_ms``: how often the feed pushes a stream; a candle's last push (its
        close) carries the instant of its last update, up to one interval before the close time."""
        return FrameGuardConfig(
            close_tolerance_ms=max(1_000, feed_update_ms),
            max_clock_skew_secs=self.max_clock_skew_secs,
            max_frame_age_secs=self.max_frame_age_secs,
            max_price_move_frac=self.max_price_move_frac,
            max_candle_range_frac=self.max_candle_range_frac,
            reanchor_after_secs=self.reanchor_after_secs,
        )


class SimConfig(_Section):
    host: Literal["127.0.0.1"] = "127.0.0.1"  # the simulator never listens beyond loopback
    port: int = Field(0, ge=0, le=65535)  # 0: any free port
    start: datetime = datetime(2025, 3, 1, tzinfo=UTC)
    speed: float = Field(60.0, gt=0, le=100_000)
    #: simulated ms between two kline updates of a stream (Binance: 250); must divide 5 minutes
    update_interval_ms: int = Field(250, ge=1, le=75_000)

    @field_validator("update_interval_ms")
    @classmethod
    def _divides_a_bar(cls, value: int) -> int:
        if 300_000 % value:
            raise ValueError(f"must divide 300000 (one 5m bar), got {value}")
        return value

    @property
    def start_ms(self) -> int:
        start = self.start if self.start.tzinfo else self.start.replace(tzinfo=UTC)
        return int(start.timestamp() * 1000)


class SupervisorConfig(_Section):
    heartbeat_interval_secs: float = Field(30.0, gt=0)
    heartbeat_stale_secs: float = Field(90.0, gt=0)
    # `vigil health` fails when no stream had a valid frame for this long (real seconds)
    market_stale_secs: float = Field(300.0, gt=0)
    watchdog_silence_secs: float = Field(300.0, gt=0)
    watchdog_check_secs: float = Field(15.0, gt=0)
    shutdown_deadline_secs: float = Field(8.0, gt=0)  # under docker stop's 10 s
    restart_base_secs: float = Field(1.0, gt=0)
    restart_cap_secs: float = Field(60.0, gt=0)
    restart_jitter_fraction: float = Field(0.5, ge=0, le=1)
    status_interval_secs: float = Field(3600.0, gt=0)


class StateConfig(_Section):
    watch_interval_secs: float = Field(2.0, gt=0)
    #: false (what replay sets): journals, runner_state.json and paper_broker.json are not fsynced,
    #: analysts.db is never synced, and session files are written behind (every 256 sets)
    fsync_journals: bool = True


class BrokerConfig(_Section):
    """Which broker executes, and the paper broker's terms (percentages: 0.02 means 0.02 %).

    ``ccxt`` trades on Binance USDⓈ-M demo trading (testnet) with BINANCE_API_KEY/SECRET, or live only
    with ``vigil run --live`` AND ``VIGIL_LIVE_CONFIRM=yes``; under ``--sim`` it trades on the
    simulator's order endpoints."""

    kind: Literal["paper", "ccxt"] = "paper"
    starting_cash_usd: float = Field(10_000.0, gt=0)
    maker_fee_pct: float = Field(0.02, ge=0, le=1)
    taker_fee_pct: float = Field(0.05, ge=0, le=1)
    slippage_pct: float = Field(0.05, ge=0, le=5)
    limit_ttl_secs: float = Field(900.0, gt=0)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VIGIL_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        # a TOML table or VIGIL_A__B__C variable changes only the fields it names: without this a
        # section whose default differs from its class's (derivatives.funding's ttl_secs, the
        # debate roles) was replaced whole, its other fields reset or "Field required"
        nested_model_default_partial_update=True,
    )

    config_file: ConfigPath | None = None
    state_dir: ConfigPath = STATE_DIR
    #: recorded market data; None: the data/ folder shipped with vigil
    data_dir: ConfigPath | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: line format (text / json) and the size-rotated file logs/vigil.log (runner.logging_setup)
    log: LogConfig = LogConfig()
    market: MarketConfig = MarketConfig()
    sim: SimConfig = SimConfig()
    supervisor: SupervisorConfig = SupervisorConfig()
    state: StateConfig = StateConfig()
    #: decisions.jsonl rotation by day / size, gzip, retention (state.rotation)
    journal: JournalRotationConfig = JournalRotationConfig()
    agent: AgentConfig = AgentConfig()
    broker: BrokerConfig = BrokerConfig()
    gate: GateConfig = GateConfig()
    regime: RegimeConfig = RegimeConfig()
    tracker: TrackerConfig = TrackerConfig()
    derivatives: DerivativesConfig = DerivativesConfig()
    api: ApiConfig = ApiConfig()
    notify: NotifyConfig = NotifyConfig()  # webhooks (fills, exits, halts, breaker, health, day)
    #: the API's bearer token: VIGIL_API_TOKEN or the secret file vigil_api_token (see api.auth)
    api_token: SecretStr | None = None
    context: ContextConfig = ContextConfig()
    prompt: PromptBudgets = PromptBudgets()
    memory: MemoryConfig = MemoryConfig()

    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("anthropic_api_key", "ANTHROPIC_API_KEY")
    )
    binance_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("binance_api_key", "BINANCE_API_KEY")
    )
    binance_api_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("binance_api_secret", "BINANCE_API_SECRET")
    )
    # restart-safety tests only: named points where the daemon kills itself (core/failpoints.py)
    failpoints: tuple[str, ...] = ()
    fred_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("fred_api_key", "FRED_API_KEY")
    )

    @field_validator("api_token")
    @classmethod
    def _token_a_header_carries(cls, value: SecretStr | None) -> SecretStr | None:
        problem = None if not value else token_problem(value.get_secret_value())
        if problem is not None:
            raise ValueError(problem)
        return value

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def heartbeat_path(self) -> Path:
        return self.state_dir / "heartbeat"

    @property
    def runner_state_path(self) -> Path:
        return self.state_dir / "runner_state.json"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        secrets_dir = _secrets_dir()
        if secrets_dir is not None:
            sources.append(SecretsSettingsSource(settings_cls, secrets_dir=secrets_dir))
        toml_file = _toml_file()
        if toml_file is not None:
            tables = read_toml_file(toml_file, "config file", max_bytes=CONFIG_FILE_MAX_BYTES)
            refuse_names_spelt_twice(tables, toml_file)
            sources.append(InitSettingsSource(settings_cls, tables))
        return tuple(sources)

    def digest(self) -> str:
        """16 hex digits of the effective config that shapes a run's decisions: secrets only as
        set / not set; the state dir, config file path, logging, journal rotation and the
        operator's API left out (the same settings in another folder, more verbose, filed or
        watched differently, are the same experiment)."""
        data = self.redacted()
        for name in ("state_dir", "config_file", "log_level", "api", "api_token", "journal", "log"):
            data.pop(name, None)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def secret_values(self) -> list[str]:
        """Every configured secret's value, for redaction (logs, memory notes)."""
        top = [v.get_secret_value() for _, v in self if isinstance(v, SecretStr)]
        return top + self.notify.secret_values()  # webhook URLs carry their tokens

    def redacted(self) -> dict[str, Any]:
        """The effective config as plain data, secrets shown only as set / not set."""
        data = self.model_dump(mode="json")
        for name, value in self:
            if isinstance(value, SecretStr):
                data[name] = "**********"
        return data


def _toml_file() -> Path | None:
    explicit = os.environ.get("VIGIL_CONFIG_FILE")
    if explicit:
        return Path(explicit)
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def secrets_dir_now() -> Path | None:
    """The secret files' directory as configured now (a key rotation may be read from it)."""
    return _secrets_dir()


def _secrets_dir() -> Path | None:
    configured = os.environ.get("VIGIL_SECRETS_DIR")
    if configured:
        return Path(configured)
    default = Path("/run/secrets")
    return default if default.is_dir() else None


def _check_secrets_dir() -> None:
    """A ``VIGIL_SECRETS_DIR`` that is missing was passed over, and a folder or FIFO at a secret's
    file taken as no secret with a Python warning: either way the keys in it went unread without a
    word (Claude's decisions fell back to the rules, say). Both refuse to start, naming them, and
    so does a secret's file past ``SECRET_FILE_MAX_BYTES`` (it was read whole)."""
    folder = _secrets_dir()
    if folder is None:
        return
    require_folder(folder, "VIGIL_SECRETS_DIR")
    names = {f"vigil_{name}" for name in Settings.model_fields}
    for info in Settings.model_fields.values():
        if isinstance(info.validation_alias, AliasChoices):
            names |= {str(choice).lower() for choice in info.validation_alias.choices}
    try:
        entries = list(folder.iterdir())
    except OSError as exc:
        raise RefuseToStartError(
            f"VIGIL_SECRETS_DIR {folder} cannot be read: {exc.strerror}"
        ) from None
    for entry in entries:
        if entry.name.lower() in names:
            _check_secret_file(entry)


def _check_secret_file(entry: Path) -> None:
    if not entry.is_file():
        raise RefuseToStartError(f"secret file {entry} is not a regular file (a folder or FIFO)")
    size = entry.stat().st_size
    if size > SECRET_FILE_MAX_BYTES:
        # read whole as the secret: a sparse file of a gigabyte was a key of a billion NULs
        raise RefuseToStartError(
            f"secret file {entry} is {size:,} bytes, over the {SECRET_FILE_MAX_BYTES:,} "
            "a secret may hold"
        )
    try:
        entry.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        # the settings' own read failed with a hint about JSON in the environment, naming no file
        raise RefuseToStartError(
            f"secret file {entry} is not text (UTF-8): byte 0x{exc.object[exc.start]:02x} at "
            f"position {exc.start}; a secret is the key's text (a binary file put there?)"
        ) from None
    except OSError as exc:
        raise RefuseToStartError(f"secret file {entry} cannot be read: {exc.strerror}") from None


#: VIGIL_* variables read outside the settings model
_OTHER_VIGIL_VARIABLES = frozenset({"VIGIL_SECRETS_DIR", "VIGIL_LIVE_CONFIRM"})


def _check_environment() -> None:
    """A mistyped ``VIGIL_*`` variable would silently do nothing; refuse it instead.

    Environment names are case-insensitive for the settings, so they are checked that way too. The
    secrets are read from their conventional names (``ANTHROPIC_API_KEY``...), never with the
    ``VIGIL_`` prefix, so ``VIGIL_ANTHROPIC_API_KEY`` is refused rather than silently ignored.
    """
    fields = {
        name.upper()
        for name, info in Settings.model_fields.items()
        if info.validation_alias is None
    }
    unknown = sorted(
        name
        for name in os.environ
        if name.upper().startswith("VIGIL_")
        and name.upper() not in _OTHER_VIGIL_VARIABLES
        and name.upper().removeprefix("VIGIL_").split("__", 1)[0] not in fields
    )
    if unknown:
        shown = [
            f"  {name} = {_shown(name, os.environ[name])}: unknown setting" for name in unknown
        ]
        raise RefuseToStartError(
            "unknown VIGIL_* environment variable(s):\n"
            + "\n".join(shown)
            + f"\n(known settings: {', '.join(sorted('VIGIL_' + f for f in fields))}; "
            "API keys are read from ANTHROPIC_API_KEY, BINANCE_API_KEY, BINANCE_API_SECRET, "
            "FRED_API_KEY)"
        )
    ambiguous = _ambiguous_spellings()
    if ambiguous:
        raise RefuseToStartError(
            "ambiguous environment variable(s) (setting names ignore case):\n"
            + "\n".join(ambiguous)
        )


#: read by their exact name (os.environ), not through the settings, which ignore case
_EXACT_NAMES = frozenset({"VIGIL_CONFIG_FILE", *_OTHER_VIGIL_VARIABLES})
_SECRET_ALIASES = frozenset(
    {"ANTHROPIC_API_KEY", "BINANCE_API_KEY", "BINANCE_API_SECRET", "FRED_API_KEY"}
)


def _ambiguous_spellings() -> list[str]:
    """Lines naming variables of which vigil would silently read one or none.

    Linux keeps ``VIGIL_MARKET__SOURCE`` and ``vigil_market__source`` apart, the settings do not:
    with both set to different values, whichever the environment lists last won. The variables
    read by their exact name were ignored when spelled in another case (``vigil_config_file``
    set ``config_file`` but no file was read)."""
    by_key: dict[str, list[str]] = {}
    for name in os.environ:
        key = name.upper()
        if key.startswith("VIGIL_") or key in _SECRET_ALIASES:
            by_key.setdefault(key, []).append(name)
    lines = []
    for key, names in sorted(by_key.items()):
        if len({os.environ[name] for name in names}) > 1:
            shown = ", ".join(f"{n} = {_shown(n, os.environ[n])}" for n in sorted(names))
            lines.append(f"  {shown}: one setting spelt {len(names)} ways; set it once")
        elif key in _EXACT_NAMES and names != [key]:
            wrong = [n for n in names if n != key]
            lines.extend(f"  {n}: read only as {key}" for n in sorted(wrong))
    return lines


# a webhook's url carries its bot token or key (api.notify.config)
_SECRET_NAME = re.compile(
    r"(^|[_.])(key|secret|token|password)$|webhooks\.\d+\.url$|notify__webhooks$"
)

_WEBHOOKS = re.compile(r"webhooks(\.\d+)?$")


def _is_secret_name(name: str) -> bool:
    """``anthropic_api_key``, ``VIGIL_FOO_SECRET``: yes; ``agent.max_tokens``: no."""
    return _SECRET_NAME.search(name.lower()) is not None


def _shown(name: str, value: object) -> str:
    if _is_secret_name(name):
        return "<secret>"
    # a table or list refused whole (a webhook without its chat_id) holds its secrets too
    if isinstance(value, Mapping):
        inner = ", ".join(f"{k!r}: {_shown(f'{name}.{k}', v)}" for k, v in value.items())
        return f"{{{inner}}}"
    if isinstance(value, list | tuple):
        return f"[{', '.join(_shown(f'{name}.{i}', v) for i, v in enumerate(value))}]"
    if _WEBHOOKS.search(name.lower()):
        return "<secret>"  # a url alone where the webhooks or a webhook's table should be
    return repr(value)


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """Build the settings or raise ``RefuseToStartError`` naming every bad field and value."""
    _check_environment()
    _check_secrets_dir()
    toml_file = _toml_file()
    try:
        settings = Settings(**dict(overrides or {}))
    except ValidationError as exc:
        raise RefuseToStartError(format_validation_error(exc, toml_file)) from None
    except SettingsError as exc:  # a source could not even parse a value (e.g. non-JSON list)
        raise RefuseToStartError(_format_settings_error(exc)) from None
    refuse_unusable_numbers(settings, toml_file)  # inf, nan, a duration past any use
    return settings


def _format_settings_error(exc: SettingsError) -> str:
    match = re.search(r'field "([^"]+)"', str(exc))
    field = match.group(1) if match else ""
    prefix = f"VIGIL_{field.upper()}"
    suspects = [
        f"  {name} = {_shown(name, value)}"
        for name, value in sorted(os.environ.items())
        if field and name.upper().startswith(prefix)
    ]
    cause = f": {exc.__cause__}" if exc.__cause__ else ""
    return "\n".join(
        [
            f"invalid configuration: {exc}{cause}",
            *suspects,
            "(lists and tables in the environment must be JSON, "
            """e.g. VIGIL_MARKET__TICKERS='["BTC/USDT"]')""",
        ]
    )


#: pydantic's errors for a number out of a field's bounds
_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _finite(value: object) -> bool:
    """Whether a bound's input (a TOML number, or the environment's text) is a finite number. A
    whole number is, however long (past 4,300 digits it never reaches a bound)."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return True
    if not isinstance(value, int | float | str):
        return True
    try:
        return math.isfinite(float(value))
    except (ValueError, OverflowError):
        return True  # not a number at all: the bound's own message stands


def format_validation_error(exc: ValidationError, toml_file: Path | None) -> str:
    where = f" (sources: {toml_file}, VIGIL_* environment)" if toml_file else ""
    lines = [f"invalid configuration{where}:"]
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "<root>"
        value = err.get("input")
        shown, msg = _cut(_shown(field, value)), _cut(err["msg"])
        if err["type"] == "extra_forbidden":
            lines.append(f"  {field}: unknown setting (value {shown})")
        elif err["type"] in _BOUND_ERRORS and not _finite(value):
            # the bound's message misled: nan "should be less than or equal to 100000"
            lines.append(f"  {field} = {shown}: must be a finite number")
        elif isinstance(value, dict) and len(_shown(field, value)) > _SHOWN_MAX_CHARS:
            # a check of the section as a whole (daily_budget_usd against the decider): its
            # message names the setting, and the section's every value was 2,500 characters
            lines.append(f"  [{field}]: {msg}")
        else:
            lines.append(f"  {field} = {shown}: {msg}")
    return "\n".join(lines)


#: a refusal echoes the value refused (twice, for a value its own check names): a ticker of
#: 10,000 characters in VIGIL_MARKET__TICKERS wrote 20 KB to the terminal. The value and the
#: reason are each cut in the middle past this, so both ends, and so the reason's end, are shown
_SHOWN_MAX_CHARS = 300


def _cut(text: str) -> str:
    if len(text) <= _SHOWN_MAX_CHARS:
        return text
    half = _SHOWN_MAX_CHARS // 2
    return f"{text[:half]} ...({len(text):,} characters)... {text[-half:]}"
