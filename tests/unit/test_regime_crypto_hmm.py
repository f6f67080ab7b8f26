"""The crypto volatility HMM on recorded BTC (180 days of 4h candles) and synthetic regimes.

Fitting costs about half a second, so each dataset is fitted once per module (fixtures) and the
tests read the fitted model; tests that need their own fit use small data or few iterations.
"""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
import pytest
from hmmlearn.hmm import GaussianHMM
from pydantic import ValidationError
from test_regime_support import (
    STEP_4H_MS,
    candles_from_returns,
    last_180_days,
    recorded_4h,
    two_regime_candles,
)
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from regime.crypto_hmm import (
    CRYPTO_EXPOSURE,
    LABELS_BY_N_STATES,
    CryptoHmmConfig,
    CryptoLabel,
    CryptoRegime,
    CryptoRegimeModel,
    FitReport,
    bic,
    hmm_parameter_count,
)
from regime.features import regime_features
from regime.hmm_fit import fit_hmm, stamp

BtcFit = tuple[CryptoRegimeModel, FitReport]
SyntheticFit = tuple[CryptoRegimeModel, FitReport, pd.DataFrame, np.ndarray]


@pytest.fixture(scope="module")
def btc_frame() -> pd.DataFrame:
    return last_180_days("BTC/USDT")


@pytest.fixture(scope="module")
def btc_fit(btc_frame: pd.DataFrame) -> tuple[CryptoRegimeModel, FitReport]:
    model = CryptoRegimeModel()
    return model, model.fit(btc_frame)


@pytest.fixture(scope="module")
def synthetic_fit() -> SyntheticFit:
    frame, calm = two_regime_candles()
    model = CryptoRegimeModel()
    return model, model.fit(frame), frame, calm


def test_bic_chooses_among_2_to_4_states_by_the_smallest_value(
    btc_fit: BtcFit, btc_frame: pd.DataFrame
) -> None:
    _, report = btc_fit
    assert report.fitted and report.reason is None
    assert report.n_rows == len(btc_frame) - 11 and report.n_segments == 1
    assert [c.n_states for c in report.candidates] == [2, 3, 4]
    best = min(report.candidates, key=lambda c: c.bic)
    assert report.chosen_n_states == best.n_states
    assert report.chosen_n_states in (2, 3, 4)
    assert all(c.seed in (42, 43, 44) for c in report.candidates)


def test_bic_equals_a_hand_check_of_the_formula(btc_fit: BtcFit, btc_frame: pd.DataFrame) -> None:
    _, report = btc_fit
    chosen = next(c for c in report.candidates if c.n_states == report.chosen_n_states)
    n, d, rows = chosen.n_states, 3, report.n_rows
    # diag GaussianHMM: start (n-1) + transitions n(n-1) + means n*d + variances n*d
    expected_params = (n - 1) + n * (n - 1) + n * d + n * d
    assert chosen.n_params == expected_params
    assert chosen.bic == pytest.approx(
        -2.0 * chosen.log_likelihood + expected_params * np.log(rows)
    )
    # an independent fit with hmmlearn's own BIC on the same z-scored features and seed
    values = regime_features(btc_frame).to_numpy()
    scaled = (values - values.mean(axis=0)) / values.std(axis=0)
    with threadpool_limits(limits=1):
        hmm = GaussianHMM(
            n_components=n, covariance_type="diag", n_iter=100, tol=1e-3, random_state=chosen.seed
        ).fit(scaled)
    assert hmm.bic(scaled) == pytest.approx(chosen.bic, rel=1e-9)


@pytest.mark.parametrize("n_states", [2, 3, 4])
@pytest.mark.parametrize("covariance_type", ["spherical", "diag", "full", "tied"])
def test_parameter_count_agrees_with_hmmlearn(n_states: int, covariance_type: str) -> None:
    hmm = GaussianHMM(n_components=n_states, covariance_type=covariance_type)
    hmm.n_features = 3
    assert hmm_parameter_count(n_states, 3, covariance_type) == sum(
        hmm._get_n_fit_scalars_per_param().values()
    )
    assert bic(-100.0, 10, 1000) == pytest.approx(200.0 + 10 * np.log(1000))


def test_states_are_ranked_by_realised_vol_and_labelled_by_count(btc_fit: BtcFit) -> None:
    _, report = btc_fit
    assert report.chosen_n_states is not None
    vols = [s.mean_realised_vol for s in report.states]
    assert vols == sorted(vols) and len(set(vols)) == len(vols)
    assert [s.rank for s in report.states] == list(range(len(report.states)))
    assert tuple(s.label for s in report.states) == LABELS_BY_N_STATES[report.chosen_n_states]
    assert sum(s.occupancy_pct for s in report.states) == pytest.approx(100.0)


def test_label_table_maps_4_states_to_low_medium_medium_high() -> None:
    assert LABELS_BY_N_STATES[2] == (CryptoLabel.LOW, CryptoLabel.HIGH)
    assert LABELS_BY_N_STATES[3] == (CryptoLabel.LOW, CryptoLabel.MEDIUM, CryptoLabel.HIGH)
    assert LABELS_BY_N_STATES[4] == (
        CryptoLabel.LOW,
        CryptoLabel.MEDIUM,
        CryptoLabel.MEDIUM,
        CryptoLabel.HIGH,
    )
    assert [CRYPTO_EXPOSURE[label] for label in CryptoLabel] == [1.0, 0.8, 0.6, 1.0]


def test_predict_on_recorded_data(btc_fit: BtcFit, btc_frame: pd.DataFrame) -> None:
    model, report = btc_fit
    regime = model.predict(btc_frame)
    assert regime.label is not CryptoLabel.UNKNOWN and regime.reason is None
    assert regime.exposure == CRYPTO_EXPOSURE[regime.label]
    assert regime.n_states == report.chosen_n_states
    assert regime.state is not None and report.states[regime.state].label == regime.label
    assert regime.probability is not None and 0.0 < regime.probability <= 1.0
    assert regime.as_of_ms == int(btc_frame.index[-1])
    assert regime.fitted_at_ms == int(btc_frame.index[-1]) + STEP_4H_MS  # default: last close


def predictions(model: CryptoRegimeModel, frame: pd.DataFrame, ends: range) -> list[CryptoRegime]:
    """``predict`` as the tracker calls it at each 4h close: on the candles up to ``end``."""
    return [model.predict(frame.iloc[:end]) for end in ends]


def test_same_data_gives_the_same_model_twice_and_across_a_refit(
    btc_fit: BtcFit, btc_frame: pd.DataFrame
) -> None:
    model, report = btc_fit
    ends = range(200, len(btc_frame) + 1, 40)
    regimes = predictions(model, btc_frame, ends)
    again = CryptoRegimeModel()
    assert again.fit(btc_frame) == report
    assert predictions(again, btc_frame, ends) == regimes
    # the same instance refitted (the tracker's daily refit on unchanged data)
    assert again.fit(btc_frame) == report
    assert predictions(again, btc_frame, ends) == regimes


def test_calm_stretches_map_to_low_volatility(synthetic_fit: SyntheticFit) -> None:
    model, report, frame, calm = synthetic_fit
    assert report.fitted
    # the label predict gives at every candle (its filtered posterior, as at a live 4h close)
    position = np.arange(12, len(frame))
    labels = pd.Series(
        [model.predict(frame.iloc[: p + 1]).label.value for p in position], index=position
    )
    # skip the first 11 candles of each 120-candle block: their windows straddle the switch
    interior = (position - 1) % 120 >= 11
    calm_labels = labels[interior & calm[position]]
    wild_labels = labels[interior & ~calm[position]]
    assert len(calm_labels) > 200 and len(wild_labels) > 200
    assert (calm_labels == "low_volatility").all()
    assert not (wild_labels == "low_volatility").any()
    assert (wild_labels == "high_volatility").mean() > 0.5
    # and live predictions at the end of a calm block / of a wild block
    end_of_calm = frame.iloc[: 1 + 3 * 120]
    end_of_wild = frame.iloc[: 1 + 2 * 120]
    assert model.predict(end_of_calm).label is CryptoLabel.LOW
    assert model.predict(end_of_calm).exposure == 1.0
    assert model.predict(end_of_wild).label is CryptoLabel.HIGH
    assert model.predict(end_of_wild).exposure == 0.6


def test_too_little_data_is_unknown_and_says_so() -> None:
    frame = recorded_4h("SOL/USDT").iloc[:110]  # 99 feature rows
    model = CryptoRegimeModel()
    before = model.predict(frame)
    assert before.label is CryptoLabel.UNKNOWN and before.exposure == 1.0
    assert before.reason is not None and "not run yet" in before.reason
    report = model.fit(frame)
    assert not report.fitted and report.n_rows == 99
    assert report.reason is not None and "too little data" in report.reason
    assert "need >= 100" in report.reason
    regime = model.predict(frame)
    assert regime.label is CryptoLabel.UNKNOWN and regime.exposure == 1.0
    assert regime.reason is not None and "too little data" in regime.reason
    assert regime.state is None and regime.probability is None


def test_a_failed_refit_keeps_the_previous_model(synthetic_fit: SyntheticFit) -> None:
    _, _, frame, _ = synthetic_fit
    model = CryptoRegimeModel(CryptoHmmConfig(n_states_max=2, restarts=1))
    assert model.fit(frame).fitted
    assert not model.fit(frame.iloc[:50]).fitted
    assert model.is_fitted
    assert model.predict(frame).label is not CryptoLabel.UNKNOWN


def test_predict_without_enough_candles_for_a_feature_row(
    btc_fit: BtcFit, btc_frame: pd.DataFrame
) -> None:
    model, _ = btc_fit
    regime = model.predict(btc_frame.iloc[:11])
    assert regime.label is CryptoLabel.UNKNOWN
    assert regime.reason is not None and "more than 11" in regime.reason


def test_bad_candles_are_unknown_not_a_crash(btc_fit: BtcFit, btc_frame: pd.DataFrame) -> None:
    model, _ = btc_fit
    broken = btc_frame.copy()
    broken.loc[broken.index[-1], "close"] = 0.0
    regime = model.predict(broken)
    assert regime.label is CryptoLabel.UNKNOWN and regime.reason is not None
    assert "features" in regime.reason
    report = CryptoRegimeModel().fit(broken)
    assert not report.fitted and report.reason is not None and "features" in report.reason


def test_constant_prices_cannot_be_fitted() -> None:
    report = CryptoRegimeModel().fit(candles_from_returns(np.zeros(200)))
    assert not report.fitted and report.reason == "a feature is constant over the window"


def test_non_convergence_is_reported_not_raised(
    synthetic_fit: SyntheticFit, caplog: pytest.LogCaptureFixture
) -> None:
    _, _, frame, _ = synthetic_fit
    model = CryptoRegimeModel(CryptoHmmConfig(n_iter=2, restarts=1, tol=1e-9))
    with caplog.at_level(logging.WARNING):
        report = model.fit(frame)
    assert report.fitted
    assert not any(c.converged for c in report.candidates)
    assert all(c.iterations == 2 for c in report.candidates)
    assert any("before converging" in note for note in report.warnings)
    assert any("regime HMM fit" in r.getMessage() for r in caplog.records)
    assert not any(r.name.startswith("hmmlearn") for r in caplog.records)


def test_gaps_split_the_sequence(btc_frame: pd.DataFrame) -> None:
    gapped = btc_frame.drop(btc_frame.index[[300, 700]])
    model = CryptoRegimeModel(CryptoHmmConfig(n_states_max=2, restarts=1))
    report = model.fit(gapped)
    assert report.fitted and report.n_segments == 3
    assert report.n_rows == len(gapped) - 3 * 11


def test_a_fit_in_another_process_is_the_same_fit(synthetic_fit: SyntheticFit) -> None:
    """The fit-ahead pool's path: ``fit_hmm`` in a spawned worker, stamped on arrival."""
    model, report, frame, _ = synthetic_fit
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        ahead = pool.submit(fit_hmm, model.config, frame).result()
    assert ahead[0] == report
    stamped, fitted = stamp(ahead, 123)
    assert stamped == model.fit(frame, fitted_at_ms=123) and stamped.fitted_at_ms == 123
    assert fitted is not None and fitted.fitted_at_ms == 123
    assert fit_hmm(model.config, frame, 123)[0] == stamped


def test_predict_before_any_fit_is_unknown_and_says_why(btc_frame: pd.DataFrame) -> None:
    regime = CryptoRegimeModel().predict(btc_frame)
    assert regime.label is CryptoLabel.UNKNOWN
    assert regime.reason == "no fitted regime model: fit has not run yet"


def test_config_refuses_an_empty_state_range() -> None:
    with pytest.raises(ValidationError):
        CryptoHmmConfig(n_states_min=4, n_states_max=3)
    with pytest.raises(ValidationError):
        CryptoHmmConfig(n_states_max=5)


def test_a_restart_that_stopped_early_is_a_note_when_the_chosen_fit_converged() -> None:
    from regime.crypto_hmm import CandidateFit, FitReport
    from regime.hmm_fit import chosen_converged as _chosen_converged

    def candidate(n_states: int, converged: bool) -> CandidateFit:
        return CandidateFit(
            n_states=n_states,
            seed=42,
            log_likelihood=-1.0,
            n_params=10,
            bic=1.0,
            converged=converged,
            iterations=100 if not converged else 12,
        )

    chosen_fine = FitReport(
        fitted=True,
        n_rows=500,
        n_segments=1,
        chosen_n_states=2,
        candidates=(candidate(2, True), candidate(3, False)),
        warnings=("n=3 seed=42: EM stopped at n_iter=100 before converging",),
    )
    assert _chosen_converged(chosen_fine)  # logged at INFO: a note, not a warning
    chosen_stuck = chosen_fine.model_copy(update={"chosen_n_states": 3})
    assert not _chosen_converged(chosen_stuck)  # the model in use did not converge: WARNING
