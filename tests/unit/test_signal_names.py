"""Signal names: every source by its own name (funding, open interest and basis are not merged
into "derivatives", nor macro into "regime"), synonyms mapped in one table, and the regime
agreement a boolean with its reason, so the report can count disagreements."""

from __future__ import annotations

import pytest
from fakes.claude_support import PRICES, answer, decision_with
from hypothesis import given
from hypothesis import strategies as st

from agent.claude_schema import answer_json_schema, convert_answer, extract_signal_weights
from agent.signal_names import SIGNAL_KEYWORDS, SIGNAL_NAMES, SYNONYMS, canonical_signal
from learner.online import OnlineLearner

SEED_NAMES = ("rsi", "momentum", "bollinger", "funding", "open_interest", "basis", "taker_flow",
              "long_short", "liquidations", "fear_greed", "macro", "regime")  # fmt: skip


def test_the_seeds_names_are_signals_of_their_own_in_the_schema() -> None:
    schema = answer_json_schema()["$defs"]["RawSignalWeights"]["properties"]
    for name in SEED_NAMES:
        assert name in SIGNAL_NAMES and name in schema
        assert canonical_signal(name) == name


def test_every_synonym_and_keyword_names_a_known_signal() -> None:
    assert set(SYNONYMS.values()) <= set(SIGNAL_NAMES)
    assert set(SIGNAL_KEYWORDS) <= set(SIGNAL_NAMES)
    assert not set(SYNONYMS) & set(SIGNAL_NAMES)  # a name is either canonical or a synonym


@pytest.mark.parametrize(
    ("spelling", "signal"),
    [
        ("funding_rates", "funding"),
        ("Open Interest", "open_interest"),
        ("open-interest", "open_interest"),
        ("long/short", "long_short"),
        ("long_short_ratio", "long_short"),
        ("taker_delta", "taker_flow"),
        ("sentiment", "fear_greed"),
        ("macro_quadrant", "macro"),
        ("hmm", "regime"),
        ("astrology", None),
    ],
)
def test_synonyms_map_to_one_name(spelling: str, signal: str | None) -> None:
    assert canonical_signal(spelling) == signal


@given(st.text(max_size=30))
def test_canonical_signal_is_a_known_name_or_none(name: str) -> None:
    assert canonical_signal(name) in (*SIGNAL_NAMES, None)


def test_an_answers_weights_keep_each_source_apart_and_map_synonyms() -> None:
    given_weights = {"funding_rate": 0.3, "open_interest": 0.2, "basis": 0.1, "macro": 0.15,
                     "regime": 0.15, "sentiment": 0.05, "fng": 0.05, "astrology": 0.9}  # fmt: skip
    decision, notes = convert_answer(decision_with(signal_weights=given_weights), prices=PRICES)
    assert decision.decisions[0].signal_weights == pytest.approx(
        {
            "funding": 0.3,
            "open_interest": 0.2,
            "basis": 0.1,
            "macro": 0.15,
            "regime": 0.15,
            "fear_greed": 0.1,
        }
    )
    assert [n.reason for n in notes if n.what == "signal_weights"] == [
        "dropped unknown names or non-numbers: ['astrology']"
    ]


def test_keywords_name_the_sources_apart() -> None:
    weights = extract_signal_weights("Funding flips negative, open interest builds, basis wide; "
                                     "macro stagflation against the HMM regime")  # fmt: skip
    assert set(weights) == {"funding", "open_interest", "basis", "macro", "regime"}


def test_the_learner_learns_each_source_by_its_name() -> None:
    learner = OnlineLearner(None)
    decision, _ = convert_answer(
        decision_with(signal_weights={"funding": 0.5, "open_interest": -0.5}), prices=PRICES
    )
    learner.update(decision.decisions[0].signal_weights, 4.0, "low_volatility", "BTC/USDT", 0, 60)
    signals = learner.posteriors(None)["signals"]
    assert set(signals) == {"funding", "open_interest"}
    assert signals["funding"]["mean"] > 0.5 > signals["open_interest"]["mean"]


def test_regime_agreement_is_a_boolean_with_its_reason() -> None:
    decision, notes = convert_answer(
        answer(regime_agreement=False, regime_agreement_reason="HMM lags the breakout"),
        prices=PRICES,
    )
    assert decision.regime_agreement is False
    assert decision.regime_agreement_reason == "HMM lags the breakout"
    assert notes == []
    schema = answer_json_schema()
    assert schema["properties"]["regime_agreement"]["type"] == "boolean"
    assert {"regime_agreement", "regime_agreement_reason"} <= set(schema["required"])


def test_free_text_agreement_is_kept_as_the_reason_and_noted() -> None:
    old = answer(regime_agreement="mostly agree")
    del old["regime_agreement_reason"]
    decision, notes = convert_answer(old, prices=PRICES)
    assert decision.regime_agreement is None
    assert decision.regime_agreement_reason == "mostly agree"
    assert [n.what for n in notes] == ["regime_agreement"]
