"""Settings: defaults, vigil.toml, environment precedence, refusals, secrets, immutability."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from agent.config import AgentConfig
from core.errors import RefuseToStartError
from runner.config import (
    MarketConfig,
    Settings,
    SimConfig,
    StateConfig,
    SupervisorConfig,
    load_settings,
)

SECRET = "sk-ant-test-0123456789-do-not-leak"
SECRET_ENV = ("ANTHROPIC_API_KEY", "BINANCE_API_KEY", "BINANCE_API_SECRET")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No VIGIL_* or API-key variables from the host, an empty secrets dir, cwd in tmp_path."""
    for name in list(os.environ):
        if name.upper().startswith("VIGIL_") or name.upper() in SECRET_ENV:
            monkeypatch.delenv(name)
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    monkeypatch.setenv("VIGIL_SECRETS_DIR", str(secrets_dir))
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    return workdir


def _write_toml(directory: Path, text: str, name: str = "vigil.toml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def _refusal() -> str:
    with pytest.raises(RefuseToStartError) as info:
        load_settings()
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# sources and precedence


def test_defaults_load_without_any_file_or_variable() -> None:
    settings = load_settings()
    assert settings.config_file is None
    assert settings.market == MarketConfig()
    assert settings.sim == SimConfig()
    assert settings.supervisor == SupervisorConfig()
    assert settings.state == StateConfig()
    assert settings.agent == AgentConfig()
    assert settings.anthropic_api_key is None
    assert settings.sim.host == "127.0.0.1"  # the simulator never listens beyond loopback
    assert settings.market.tickers == ("BTC/USDT", "ETH/USDT", "SOL/USDT")
    assert settings.runner_state_path == settings.state_dir / "runner_state.json"


def test_vigil_toml_in_the_working_directory_is_read(clean_env: Path) -> None:
    _write_toml(
        clean_env,
        """
log_level = "DEBUG"
[sim]
speed = 250.0
start = 2025-06-01T00:00:00Z
[market]
tickers = ["BTC/USDT"]
""",
    )
    settings = load_settings()
    assert settings.log_level == "DEBUG"
    assert settings.sim.speed == 250.0
    assert settings.sim.start_ms == 1_748_736_000_000
    assert settings.market.tickers == ("BTC/USDT",)
    assert settings.supervisor == SupervisorConfig()  # untouched sections keep their defaults


def test_vigil_config_file_names_a_toml_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = _write_toml(tmp_path, "[agent]\nmax_tokens = 4096\n", name="custom.toml")
    monkeypatch.setenv("VIGIL_CONFIG_FILE", str(path))
    settings = load_settings()
    assert settings.agent.max_tokens == 4096
    assert settings.config_file == path


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        (
            '[market]\ntickers = ["BTC/USDT"]\n[MARKET]\ntickers = ["ETH/USDT"]\n',
            "'market' and 'MARKET'",
        ),
        ("[sim]\nSpeed = 5.0\nspeed = 6.0\n", "'sim.Speed' and 'sim.speed'"),
    ],
)
def test_one_setting_spelt_two_ways_in_the_file_refuses_to_start(
    clean_env: Path, toml: str, said: str
) -> None:
    """Names ignore case, so the first spelling won unseen (the environment's were refused)."""
    _write_toml(clean_env, toml)
    message = _refusal()
    assert said in message and "one setting spelt two ways" in message


def test_a_missing_vigil_config_file_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VIGIL_CONFIG_FILE", str(tmp_path / "nope.toml"))
    message = _refusal()
    assert "nope.toml" in message
    assert "does not exist" in message


def test_environment_overrides_toml_and_explicit_overrides_beat_both(
    monkeypatch: pytest.MonkeyPatch, clean_env: Path
) -> None:
    _write_toml(clean_env, "[sim]\nspeed = 10.0\nport = 9000\n")
    monkeypatch.setenv("VIGIL_SIM__SPEED", "500")
    settings = load_settings()
    assert settings.sim.speed == 500.0  # from the environment
    assert settings.sim.port == 9000  # the rest of the [sim] table still comes from the file
    overridden = load_settings({"log_level": "WARNING"})
    assert overridden.log_level == "WARNING"
    assert overridden.sim.speed == 500.0


def test_environment_names_are_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("vigil_sim__speed", "7")
    assert load_settings().sim.speed == 7.0


def test_a_list_can_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", '["ETH/USDT", "SOL/USDT"]')
    assert load_settings().market.tickers == ("ETH/USDT", "SOL/USDT")


def test_a_secret_file_is_read() -> None:
    secrets_dir = Path(os.environ["VIGIL_SECRETS_DIR"])
    (secrets_dir / "anthropic_api_key").write_text(SECRET, encoding="utf-8")
    settings = load_settings()
    assert settings.anthropic_api_key is not None
    assert settings.anthropic_api_key.get_secret_value() == SECRET


# ---------------------------------------------------------------------------------------------
# refusals: each names the field and the bad value


@pytest.mark.parametrize(
    ("toml", "field", "value"),
    [
        ("surprise = 'x'\n", "surprise", "'x'"),
        ("[sim]\nspeedy = 12345\n", "sim.speedy", "12345"),
        ("[nosuchsection]\nx = 1\n", "nosuchsection", "'x'"),
    ],
)
def test_an_unknown_toml_key_refuses_to_start(
    clean_env: Path, toml: str, field: str, value: str
) -> None:
    _write_toml(clean_env, toml)
    message = _refusal()
    assert field in message
    assert value in message
    assert "unknown setting" in message
    assert "vigil.toml" in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VIGIL_SIMM__SPEED", "3"),  # typo in the section
        ("VIGIL_LOGLEVEL", "DEBUG"),  # typo in a field
        ("vigil_bogus", "on"),  # lower case is still ours
    ],
)
def test_an_unknown_vigil_variable_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    message = _refusal()
    assert name in message
    assert repr(value) in message


def test_an_unknown_field_inside_a_known_section_variable_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_SIM__SPEEDY", "31337")
    message = _refusal()
    assert "sim.speedy" in message
    assert "31337" in message


def test_a_prefixed_api_key_is_refused_instead_of_silently_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_ANTHROPIC_API_KEY", SECRET)
    message = _refusal()
    assert "VIGIL_ANTHROPIC_API_KEY" in message
    assert "ANTHROPIC_API_KEY" in message.replace("VIGIL_ANTHROPIC_API_KEY", "")  # the right name
    assert SECRET not in message


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("VIGIL_SIM__SPEED", "fast", "sim.speed"),
        ("VIGIL_SIM__PORT", "eighty", "sim.port"),
        ("VIGIL_LOG_LEVEL", "chatty", "log_level"),
        ("VIGIL_STATE__FSYNC_JOURNALS", "maybe", "state.fsync_journals"),
    ],
)
def test_a_wrongly_typed_variable_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, field: str
) -> None:
    monkeypatch.setenv(name, value)
    message = _refusal()
    assert field in message
    assert repr(value) in message


def test_a_wrongly_typed_toml_value_refuses_to_start(clean_env: Path) -> None:
    _write_toml(clean_env, "[market]\nhistory_days = 'half a year'\n")
    message = _refusal()
    assert "market.history_days" in message
    assert "'half a year'" in message


def test_a_non_json_list_in_the_environment_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", "BTC/USDT,ETH/USDT")
    message = _refusal()
    assert "market" in message
    assert "VIGIL_MARKET__TICKERS" in message
    assert "'BTC/USDT,ETH/USDT'" in message


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("VIGIL_SIM__SPEED", "0", "sim.speed"),
        ("VIGIL_SIM__SPEED", "1000000", "sim.speed"),
        ("VIGIL_SIM__PORT", "70000", "sim.port"),
        ("VIGIL_AGENT__MAX_TOKENS", "12", "agent.max_tokens"),
        ("VIGIL_SUPERVISOR__RESTART_JITTER_FRACTION", "1.5", "supervisor.restart_jitter_fraction"),
        ("VIGIL_SIM__HOST", "0.0.0.0", "sim.host"),
    ],
)
def test_an_out_of_range_value_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, field: str
) -> None:
    monkeypatch.setenv(name, value)
    message = _refusal()
    assert field in message
    assert repr(value) in message


def test_every_bad_field_is_named_at_once(monkeypatch: pytest.MonkeyPatch, clean_env: Path) -> None:
    _write_toml(clean_env, "[market]\nhistory_days = 0\n")
    monkeypatch.setenv("VIGIL_SIM__SPEED", "-1")
    message = _refusal()
    assert "market.history_days = 0" in message
    assert "sim.speed = '-1'" in message


@pytest.mark.parametrize("text", ["[sim\nspeed = 1\n", "speed = \n", "a = 'unterminated\n"])
def test_invalid_toml_syntax_refuses_to_start(clean_env: Path, text: str) -> None:
    _write_toml(clean_env, text)
    message = _refusal()
    assert "vigil.toml" in message
    assert "not valid TOML" in message
    assert "(at " in message  # the parser's pointer to the place comes along


# ---------------------------------------------------------------------------------------------
# secrets and immutability


def test_api_keys_are_secret_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("BINANCE_API_SECRET", SECRET + "-binance")
    settings = load_settings()
    assert isinstance(settings.anthropic_api_key, SecretStr)
    assert settings.anthropic_api_key.get_secret_value() == SECRET
    assert settings.binance_api_secret is not None
    assert settings.binance_api_secret.get_secret_value() == SECRET + "-binance"
    redacted = settings.redacted()
    assert redacted["anthropic_api_key"] == "**********"
    assert redacted["binance_api_key"] is None  # unset stays visibly unset
    for text in (json.dumps(redacted), str(settings), repr(settings), str(settings.model_dump())):
        assert SECRET not in text


def test_a_refusal_never_quotes_a_secret(monkeypatch: pytest.MonkeyPatch, clean_env: Path) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    _write_toml(clean_env, "binance_api_key = 918273645\n[sim]\nspeed = 'fast'\n")
    message = _refusal()
    assert "sim.speed = 'fast'" in message
    assert "binance_api_key" in message
    assert "918273645" not in message  # a wrongly typed secret is still not echoed
    assert SECRET not in message


def test_an_uppercase_secret_key_in_toml_is_not_echoed_either(clean_env: Path) -> None:
    _write_toml(clean_env, "ANTHROPIC_API_KEY = 918273645\n")
    message = _refusal()
    assert "anthropic_api_key" in message.lower()
    assert "918273645" not in message


def test_settings_and_their_sections_are_frozen() -> None:
    settings = load_settings()
    with pytest.raises(ValidationError):
        settings.log_level = "DEBUG"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.sim.speed = 1.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.market.tickers = ("DOGE/USDT",)  # type: ignore[misc]
    assert settings.sim.speed == SimConfig().speed


def test_a_naive_start_time_is_read_as_utc() -> None:
    sim = SimConfig.model_validate({"start": "2025-03-01T00:00:00"})
    assert sim.start_ms == 1_740_787_200_000
    assert Settings.model_fields["anthropic_api_key"].default is None


# ---------------------------------------------------------------------------------------------
# what the environment may not leave to chance


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VIGIL_STATE_DIR", ""),
        ("VIGIL_DATA_DIR", "  "),
        ("VIGIL_CONFIG_FILE", ""),
        ("VIGIL_REGIME__FIT_CACHE_DIR", ""),
        ("VIGIL_REGIME__FRED_SNAPSHOT_DIR", ""),
        ("VIGIL_CONTEXT__ORGANISATION_PATH", ""),
    ],
)
def test_an_empty_path_setting_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """``Path("")`` is the working directory: the daemon wrote its state wherever it started."""
    monkeypatch.setenv(name, value)
    message = _refusal()
    assert "an empty path" in message
    assert name.removeprefix("VIGIL_").lower().replace("__", ".") in message


def test_an_empty_path_in_the_toml_refuses_to_start(clean_env: Path) -> None:
    _write_toml(clean_env, 'state_dir = ""\n')
    assert "state_dir = '': Value error, an empty path" in _refusal()


def test_one_setting_spelt_two_ways_with_two_values_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_SIM__SPEED", "500")
    monkeypatch.setenv("vigil_sim__speed", "7")
    message = _refusal()
    assert "VIGIL_SIM__SPEED = '500', vigil_sim__speed = '7': one setting spelt 2 ways" in message
    monkeypatch.setenv("vigil_sim__speed", "500")  # the same value: nothing is left to chance
    assert load_settings().sim.speed == 500


def test_two_spellings_of_an_api_key_refuse_without_quoting_either(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("anthropic_api_key", SECRET + "-other")
    message = _refusal()
    assert "ANTHROPIC_API_KEY" in message and "anthropic_api_key" in message
    assert SECRET not in message


@pytest.mark.parametrize("name", ["vigil_config_file", "Vigil_Secrets_Dir", "vigil_live_confirm"])
def test_a_variable_read_by_its_exact_name_is_refused_in_another_case(
    monkeypatch: pytest.MonkeyPatch, clean_env: Path, name: str
) -> None:
    """These are read with os.environ, not the settings: ``vigil_config_file`` set
    ``config_file`` but no file was read."""
    monkeypatch.delenv("VIGIL_SECRETS_DIR")  # the fixture's; spelt once
    _write_toml(clean_env, "[sim]\nspeed = 3\n", "elsewhere.toml")
    monkeypatch.setenv(name, str(clean_env / "elsewhere.toml"))
    assert f"{name}: read only as {name.upper()}" in _refusal()


@pytest.mark.parametrize(
    "hook",
    [
        {"url": f"https://api.telegram.org/bot{SECRET}/sendMessage", "kind": "telegram"},
        {"url": f"ftp://hooks.example/{SECRET}"},
        {"url": f"https://hooks.example/{SECRET}", "kind": "slack", "events": ["fills"]},
        {"url": f"https://hooks.example/{SECRET}", "kind": "teams"},
        {"url": f"https://hooks.example/{SECRET}", "chat": "-100"},
        f"https://hooks.example/{SECRET}",  # the url alone where its table should be
    ],
)
def test_a_refused_webhook_never_quotes_its_url(
    monkeypatch: pytest.MonkeyPatch, hook: object
) -> None:
    # the url holds the hook's secret; a refusal of the whole webhook showed it whole
    monkeypatch.setenv("VIGIL_NOTIFY__WEBHOOKS", json.dumps([hook]))
    message = _refusal()
    assert "notify.webhooks.0" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"https://hooks.example:99999/{SECRET}", "port"),
        (f"https://hooks.example:0/{SECRET}", "port"),
        (f"https://hooks.example:abc/{SECRET}", "port"),
        (f"https:///{SECRET}", "no host"),
        (f"https://:443/{SECRET}", "host"),
        (f"https://[::1/{SECRET}", "cannot be read"),
        (f"hooks.example/{SECRET}", "http(s)"),
        (f"https//hooks.example/{SECRET}", "http(s)"),
    ],
    ids=["port 99999", "port 0", "port abc", "no host", "port only", "bracket", "no scheme",
         "no colon"],
)  # fmt: skip
def test_a_webhook_url_no_post_can_reach_is_refused_at_start_unquoted(
    monkeypatch: pytest.MonkeyPatch, url: str, said: str
) -> None:
    # each was accepted and every notification to it retried as if the hook were down, or (no
    # "://") the whole url, secret and all, was quoted as the scheme it lacked
    monkeypatch.setenv("VIGIL_NOTIFY__WEBHOOKS", json.dumps([{"url": url}]))
    message = _refusal()
    assert "notify.webhooks.0" in message and said in message
    assert SECRET not in message


def test_webhooks_the_environment_cannot_parse_are_not_quoted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VIGIL_NOTIFY__WEBHOOKS", f'[{{"url": "https://hooks.example/{SECRET}"}}')
    message = _refusal()
    assert "VIGIL_NOTIFY__WEBHOOKS" in message
    assert SECRET not in message


def test_webhooks_given_as_a_url_alone_are_not_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIGIL_NOTIFY__WEBHOOKS", json.dumps(f"https://hooks.example/{SECRET}"))
    message = _refusal()
    assert "notify.webhooks" in message
    assert SECRET not in message


def test_a_check_of_a_whole_section_says_its_reason_not_every_value(clean_env: Path) -> None:
    """``daily_budget_usd = -1`` is checked with the section (against the decider): the refusal
    printed all of ``[agent]``, 2,507 characters, before the reason."""
    _write_toml(clean_env, "[agent]\ndaily_budget_usd = -1\n")
    message = _refusal()
    assert "[agent]: Value error, daily_budget_usd must be > 0, got -1.0" in message
    assert "failover_models" not in message and len(message) < 400


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ("[market]\ntimeframes = []\n", "at least one timeframe is needed"),
        ('[market]\ntimeframes = ["1h", "1h"]\n', "1h listed more than once"),
    ],
)
def test_timeframes_no_stream_or_one_twice_refuse_to_start(
    clean_env: Path, toml: str, said: str
) -> None:
    _write_toml(clean_env, toml)
    assert said in _refusal()
