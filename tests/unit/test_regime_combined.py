"""CombinedRegime: the label, the exposure scale and the snapshot description."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regime.combined import CombinedRegime, combine
from regime.crypto_hmm import CRYPTO_EXPOSURE, CryptoLabel, CryptoRegime
from regime.macro import MACRO_EXPOSURE, MacroQuadrant, MacroRegime


def crypto(label: CryptoLabel) -> CryptoRegime:
    if label is CryptoLabel.UNKNOWN:
        return CryptoRegime.unknown("too little data: 40 feature rows")
    return CryptoRegime(
        label=label,
        exposure=CRYPTO_EXPOSURE[label],
        state=0,
        probability=0.912345678,
        n_states=3,
        fitted_at_ms=1_000,
        as_of_ms=900,
    )


def macro(quadrant: MacroQuadrant) -> MacroRegime:
    if quadrant is MacroQuadrant.UNAVAILABLE:
        return MacroRegime.unavailable("no FRED API key configured", source="fred")
    return MacroRegime(
        quadrant=quadrant,
        exposure=MACRO_EXPOSURE[quadrant],
        source="fred",
        as_of_ms=500,
        growth_yoy_pct=1.23456,
        growth_trend_yoy_pct=0.5,
        inflation_yoy_pct=2.9,
        inflation_prior_yoy_pct=3.1,
    )


@pytest.mark.parametrize(
    ("label", "quadrant", "expected_label", "expected_scale"),
    [
        (CryptoLabel.LOW, MacroQuadrant.GOLDILOCKS, "low_volatility_goldilocks", 1.2),
        (CryptoLabel.HIGH, MacroQuadrant.UNAVAILABLE, "high_volatility_unavailable", 0.6),
        (CryptoLabel.UNKNOWN, MacroQuadrant.UNAVAILABLE, "unknown_unavailable", 1.0),
        (CryptoLabel.MEDIUM, MacroQuadrant.STAGFLATION, "medium_volatility_stagflation", 0.48),
        (CryptoLabel.HIGH, MacroQuadrant.STAGFLATION, "high_volatility_stagflation", 0.36),
        (CryptoLabel.LOW, MacroQuadrant.DEFLATION, "low_volatility_deflation", 0.9),
        (CryptoLabel.MEDIUM, MacroQuadrant.REFLATION, "medium_volatility_reflation", 0.8),
    ],
)
def test_label_and_exposure_scale(
    label: CryptoLabel, quadrant: MacroQuadrant, expected_label: str, expected_scale: float
) -> None:
    combined = combine(crypto(label), macro(quadrant))
    assert combined.label == expected_label
    assert combined.exposure_scale == pytest.approx(expected_scale)


@given(st.sampled_from(list(CryptoLabel)), st.sampled_from(list(MacroQuadrant)))
def test_scale_is_the_product_and_bounded(label: CryptoLabel, quadrant: MacroQuadrant) -> None:
    combined = combine(crypto(label), macro(quadrant))
    assert combined.exposure_scale == pytest.approx(
        CRYPTO_EXPOSURE[label] * MACRO_EXPOSURE[quadrant]
    )
    assert 0.36 - 1e-12 <= combined.exposure_scale <= 1.2 + 1e-12
    assert combined.label == combined.label.lower()
    assert combined.label.startswith(label.value + "_")


def test_describe_is_json_ready_and_names_what_is_unavailable() -> None:
    described = combine(crypto(CryptoLabel.UNKNOWN), macro(MacroQuadrant.UNAVAILABLE)).describe()
    json.dumps(described)  # plain data
    assert described["label"] == "unknown_unavailable"
    assert described["exposure_scale"] == 1.0
    assert described["crypto"]["state"] is None and described["crypto"]["probability"] is None
    assert described["macro"]["growth_yoy_pct"] is None
    assert described["unavailable"] == {
        "crypto_regime": "too little data: 40 feature rows",
        "macro_regime": "no FRED API key configured",
    }


def test_describe_with_both_views() -> None:
    described = combine(crypto(CryptoLabel.LOW), macro(MacroQuadrant.GOLDILOCKS)).describe()
    assert described["unavailable"] == {}
    assert described["crypto"] == {
        "label": "low_volatility",
        "exposure": 1.0,
        "state": 0,
        "n_states": 3,
        "probability": 0.9123,
        "fitted_at_ms": 1_000,
        "as_of_ms": 900,
    }
    assert described["macro"]["quadrant"] == "GOLDILOCKS"
    assert described["macro"]["growth_yoy_pct"] == 1.2346


def test_the_model_dump_carries_label_and_scale() -> None:
    combined = CombinedRegime(crypto=crypto(CryptoLabel.HIGH), macro=macro(MacroQuadrant.DEFLATION))
    dumped = combined.model_dump(mode="json")
    assert dumped["label"] == "high_volatility_deflation"
    assert dumped["exposure_scale"] == pytest.approx(0.54)
