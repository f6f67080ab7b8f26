"""Regime keys of a saved learner model that the learner never looks up: every regime it is given
goes through ``regime_key``, but a file's keys were loaded as they were, so posteriors saved under
``" medium_volatility"``, ``HIGH_VOLATILITY`` or an older combined label never matched again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import RefuseToStartError
from learner.online import OnlineLearner

POSTERIOR = {"alpha": 3.0, "beta": 1.0, "trades": 4}


def written(tmp_path: Path, **fields: object) -> Path:
    path = tmp_path / "online_learner.json"
    document = {"schema_version": 1, "global_posteriors": {"rsi": POSTERIOR}} | fields
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("saved", "looked_up"),
    [
        (" medium_volatility ", "medium_volatility"),
        ("HIGH_VOLATILITY", "high_volatility"),
        ("high_volatility_risk_on", "high_volatility"),
        (" Bull", "Bull"),
    ],
)
def test_a_saved_regime_key_is_read_as_the_learner_looks_it_up(
    tmp_path: Path, saved: str, looked_up: str
) -> None:
    path = written(
        tmp_path, regime_posteriors={saved: {"rsi": POSTERIOR}}, regime_counts={saved: 5}
    )
    learner = OnlineLearner(path)
    shown = learner.posteriors(looked_up)
    assert shown["in_force"] == "regime" and shown["regime_trades"] == 5
    assert learner.regime_counts == {looked_up: 5}


def test_a_saved_key_of_no_regime_is_dropped_at_load(tmp_path: Path) -> None:
    path = written(
        tmp_path, regime_posteriors={"unknown": {"rsi": POSTERIOR}}, regime_counts={" ": 5}
    )
    learner = OnlineLearner(path)
    assert learner.regime_counts == {}
    assert learner.posteriors(None)["in_force"] == "global"


def test_two_saved_keys_of_one_regime_are_refused_naming_both(tmp_path: Path) -> None:
    path = written(
        tmp_path, regime_posteriors={"Bull": {"rsi": POSTERIOR}, " Bull ": {"rsi": POSTERIOR}}
    )
    data = path.read_bytes()
    with pytest.raises(RefuseToStartError, match=r"'Bull' and ' Bull ' are both the regime 'Bull'"):
        OnlineLearner(path)
    assert path.read_bytes() == data


@pytest.mark.parametrize(
    ("saved", "shown"),
    [
        (" medium_volatility ", "medium_volatility"),
        ("HIGH_VOLATILITY_risk_on", "high_volatility"),
        (" Bull", "Bull"),
        ("unknown", None),
        ("  ", None),
    ],
)
def test_a_saved_trades_regime_is_shown_as_the_learner_keys_it(
    tmp_path: Path, saved: str, shown: str | None
) -> None:
    """The trades' regimes were loaded as they were: the snapshot's recent_trades showed one
    regime under two spellings (or ``unknown`` as a regime) beside the keys the tables use."""
    trade = {
        "ticker": "BTC/USDT",
        "at_ms": 1,
        "pnl_pct": 2.0,
        "holding_secs": 60.0,
        "regime": saved,
        "signals": {"rsi": 0.5},
    }
    learner = OnlineLearner(written(tmp_path, recent_trades=[trade]))
    assert [t["regime"] for t in learner.recent_trades()] == [shown]
