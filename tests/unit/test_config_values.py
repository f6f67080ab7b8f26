"""``market.tickers`` (and the regime fit's seed) is checked when the settings are read: no ticker, an empty one or one listed
twice were tracebacks deep in the daemon's start-up (exit 1), and ``btc/usdt`` started a daemon
whose every stream the exchange refused, reconnecting forever."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from core.errors import RefuseToStartError
from regime.config import RESTARTS_MAX, SEED_MAX, CryptoHmmConfig
from runner.config import MarketConfig, load_settings

_GOOD = re.compile(r"[A-Z0-9]+/USDT")


@pytest.mark.parametrize(
    ("tickers", "says"),
    [
        ([], "at least one ticker"),
        ([""], "'' is not BASE/USDT"),
        (["btc/usdt"], "'btc/usdt' is not BASE/USDT"),
        (["BTC/EUR"], "'BTC/EUR' is not BASE/USDT"),
        (["BTC/USDT:USDT"], "is not BASE/USDT"),
        (["BTC/USDT", "ETH/USDT", "BTC/USDT"], "BTC/USDT listed more than once"),
    ],
)
def test_a_bad_ticker_list_refuses_to_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, tickers: list[str], says: str
) -> None:
    monkeypatch.setenv("VIGIL_MARKET__TICKERS", repr(tickers).replace("'", '"'))
    with pytest.raises(RefuseToStartError) as info:
        load_settings()
    assert "market.tickers" in str(info.value) and says in str(info.value)


@given(st.lists(st.text(max_size=12), max_size=4))
def test_tickers_are_taken_only_as_distinct_base_usdt_names(tickers: list[str]) -> None:
    good = bool(tickers) and len(set(tickers)) == len(tickers)
    good = good and all(_GOOD.fullmatch(t) for t in tickers)
    try:
        config = MarketConfig(tickers=tuple(tickers))
    except ValidationError:
        assert not good
    else:
        assert good and config.tickers == tuple(tickers)


@given(st.integers(min_value=1, max_value=RESTARTS_MAX), st.integers(min_value=0, max_value=2**40))
def test_every_restart_of_the_regime_fit_gets_a_seed_numpy_takes(restarts: int, seed: int) -> None:
    """A seed near 2**32 was taken and restarts past numpy's last seed failed (logged at INFO)."""
    try:
        config = CryptoHmmConfig(restarts=restarts, seed=seed)
    except ValidationError:
        assert seed > SEED_MAX
    else:
        assert config.seed + config.restarts - 1 <= 2**32 - 1
