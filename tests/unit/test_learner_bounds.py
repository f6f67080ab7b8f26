"""A learner model a person or a damaged save left with more arms than any run makes: thousands
of signals or regimes were loaded and shown, each with a Thompson draw, in every decision's
snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import RefuseToStartError
from learner.model_file import MAX_REGIMES, MAX_SIGNALS
from learner.online import OnlineLearner

POSTERIOR = {"alpha": 3.0, "beta": 1.0, "trades": 4}


def model(**fields: object) -> dict[str, object]:
    return {"schema_version": 1, "global_posteriors": {"rsi": POSTERIOR}} | fields


def written(tmp_path: Path, document: dict[str, object]) -> Path:
    path = tmp_path / "online_learner.json"
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("document", "where"),
    [
        (model(global_posteriors={f"s{n}": POSTERIOR for n in range(5000)}), "global_posteriors"),
        (model(regime_posteriors={f"r{n}": {"rsi": POSTERIOR} for n in range(5000)}),
         "regime_posteriors"),
        (model(regime_posteriors={"bull": {f"s{n}": POSTERIOR for n in range(5000)}}),
         "regime_posteriors.bull"),
        (model(regime_counts={f"r{n}": 1 for n in range(5000)}), "regime_counts"),
    ],
    ids=["signals", "regimes", "regime signals", "regime counts"],
)  # fmt: skip
def test_a_model_with_thousands_of_arms_is_refused_at_load(
    tmp_path: Path, document: dict[str, object], where: str
) -> None:
    path = written(tmp_path, document)
    with pytest.raises(RefuseToStartError) as refused:
        OnlineLearner(path)
    said = str(refused.value)
    assert str(path) in said and f"{where}: " in said
    assert f"at most {MAX_SIGNALS if 'signals' in where else MAX_REGIMES}" in said


def test_a_trade_that_would_grow_the_model_past_the_bound_is_not_learned(tmp_path: Path) -> None:
    # positions' entry signals come from runner_state.json, which a person may edit: what the
    # learner learns must stay a model it can load again
    path = tmp_path / "online_learner.json"
    learner = OnlineLearner(path)
    learner.update({f"s{n}": 0.5 for n in range(MAX_SIGNALS)}, 2.0, "bull", "BTC/USDT", 1, 60.0)
    with pytest.raises(ValueError, match=f"more than {MAX_SIGNALS} signals"):
        learner.update({"one_more": 0.5}, 2.0, "bull", "BTC/USDT", 2, 60.0)
    assert len(learner.recent_trades()) == 1
    learner.update({"s0": 0.5}, 2.0, "bull", "BTC/USDT", 3, 60.0)  # known signals still learn
    assert len(OnlineLearner(path).posteriors(None)["signals"]) == MAX_SIGNALS


def test_a_trade_in_one_regime_too_many_is_not_learned(tmp_path: Path) -> None:
    learner = OnlineLearner(tmp_path / "online_learner.json")
    for n in range(MAX_REGIMES):
        learner.update({"rsi": 0.5}, 2.0, f"r{n}", "BTC/USDT", n, 60.0)
    with pytest.raises(ValueError, match=f"more than {MAX_REGIMES} regimes"):
        learner.update({"rsi": 0.5}, 2.0, "one_more", "BTC/USDT", MAX_REGIMES, 60.0)
    learner.update({"rsi": 0.5}, 2.0, "r0", "BTC/USDT", MAX_REGIMES + 1, 60.0)
    assert OnlineLearner(tmp_path / "online_learner.json").regime_counts["r0"] == 2
