"""The daemon's predict without hmmlearn's model class (``regime.hmm_predict``) equals
``GaussianHMM.predict_proba`` bit for bit, and a fit in the fit pool's child process
(``regime.fit_pool``) is the very fit made inline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hmmlearn.hmm import GaussianHMM
from hmmlearn.stats import _log_multivariate_normal_density_diag
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_regime_support import last_180_days, two_regime_candles

from regime.config import CryptoHmmConfig
from regime.crypto_hmm import CryptoRegimeModel
from regime.fit_pool import FitPool, daemon_fit_workers
from regime.hmm_fit import features_of, fit_hmm
from regime.hmm_predict import HmmParams, _log_density_diag, last_posterior

SMALL = CryptoHmmConfig(n_states_max=3, restarts=1)


def _fitted_hmm(seed: int, n_states: int, rows: np.ndarray, lengths: list[int]) -> GaussianHMM:
    hmm = GaussianHMM(n_components=n_states, covariance_type="diag", n_iter=30, random_state=seed)
    return hmm.fit(rows, lengths)


@pytest.mark.parametrize("seed", range(12))
def test_last_posterior_is_hmmlearns_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_rows = int(rng.integers(120, 400))
    rows = rng.standard_normal((n_rows, 3)) * rng.uniform(0.3, 2.0, size=3)
    rows[n_rows // 2 :] *= 2.5  # two volatility levels, so the states differ
    cut = int(rng.integers(20, n_rows - 20))
    lengths = [n_rows] if seed % 3 == 0 else [cut, n_rows - cut]
    hmm = _fitted_hmm(seed, 2 + seed % 3, rows, lengths)
    expected = hmm.predict_proba(rows, lengths)[-1]
    got = last_posterior(HmmParams.of(hmm), rows, lengths)
    assert got.tobytes() == expected.tobytes(), (got, expected)


_WIDE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.sampled_from(
    [0.0, -0.0, 1e-300, -1e-300, 1e150, -1e150, 3.0, 0.1]
)


@settings(max_examples=examples(200), deadline=None)
@given(
    n_rows=st.integers(min_value=1, max_value=9),
    n_states=st.integers(min_value=1, max_value=4),
    n_features=st.integers(min_value=1, max_value=5),
    data=st.data(),
)
def test_the_emission_densities_are_hmmlearns_bit_for_bit(
    n_rows: int, n_states: int, n_features: int, data: st.DataObject
) -> None:
    """Feature by feature, summed left to right, the same floats as hmmlearn's one expression,
    over wide values: huge and tiny distances, zero and denormal variances, overflows to inf."""
    rows = np.array(
        data.draw(st.lists(_WIDE, min_size=n_rows * n_features, max_size=n_rows * n_features))
    ).reshape(n_rows, n_features)
    means = np.array(
        data.draw(st.lists(_WIDE, min_size=n_states * n_features, max_size=n_states * n_features))
    ).reshape(n_states, n_features)
    variance = st.floats(min_value=0.0, max_value=1e6) | st.sampled_from([0.0, 1e-320, 1e-3])
    covars = np.array(
        data.draw(
            st.lists(variance, min_size=n_states * n_features, max_size=n_states * n_features)
        )
    ).reshape(n_states, n_features)
    with np.errstate(over="ignore"):
        expected = _log_multivariate_normal_density_diag(rows, means, covars)
    got = _log_density_diag(rows, means, covars)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes(), (got, expected)


def test_recorded_candles_predict_as_hmmlearn_does() -> None:
    frame = last_180_days("ETH/USDT")
    model = CryptoRegimeModel(SMALL)
    assert model.fit(frame).fitted
    features = features_of(SMALL, frame)
    values = features.to_numpy(dtype=np.float64)
    fitted = fit_hmm(SMALL, frame)[1]
    assert fitted is not None
    scaled = (values - fitted.mean) / fitted.scale
    hmm = GaussianHMM(n_components=fitted.params.n_states, covariance_type="diag")
    hmm.startprob_, hmm.transmat_ = fitted.params.startprob, fitted.params.transmat
    hmm.means_, hmm.covars_ = fitted.params.means, fitted.params.covars
    posterior = hmm.predict_proba(scaled)[-1]
    regime = model.predict(frame)
    state = int(np.argmax(posterior))
    assert regime.probability == float(posterior[state])
    assert regime.state == fitted.rank_of_state[state]


def test_a_fit_in_the_pool_is_the_inline_fit() -> None:
    frame, _ = two_regime_candles()
    pool = FitPool(1)
    try:
        remote = pool.fit(SMALL, frame, 123)
        ahead = pool.submit(SMALL, frame).result()
    finally:
        pool.close()
    inline = fit_hmm(SMALL, frame, 123)
    assert remote[0] == inline[0] and remote[0].fitted
    assert remote[1] is not None and inline[1] is not None
    for name in ("startprob", "transmat", "means", "covars"):
        assert (
            getattr(remote[1].params, name).tobytes() == getattr(inline[1].params, name).tobytes()
        )
    assert ahead[0] == fit_hmm(SMALL, frame)[0]
    assert pool.pool_fits == 1 and pool.inline_fits == 0


def test_a_model_fitting_through_the_pool_predicts_as_one_fitting_inline() -> None:
    frame = last_180_days("SOL/USDT")
    pool = FitPool(1, keep_alive=False)
    try:
        remote = CryptoRegimeModel(SMALL, fitter=pool.fit)
        remote.fit(frame, fitted_at_ms=7)
        assert not pool.started  # not kept alive: the worker left with the last fit
        pool.hold()  # a batch (the daemon's tickers, one after another): one worker for all
        assert pool.starts == 1  # a hold starts nothing
        remote.fit(frame, fitted_at_ms=8)
        remote.fit(frame, fitted_at_ms=9)
        assert pool.starts == 2  # held: the worker of the first fit stayed for the second
        pool.release()
        assert not pool.started  # released: the worker left
        with pytest.raises(RuntimeError, match="without a hold"):
            pool.release()
    finally:
        pool.close()
    inline = CryptoRegimeModel(SMALL)
    for at_ms in (7, 8, 9):
        inline.fit(frame, fitted_at_ms=at_ms)
    assert remote.last_report == inline.last_report
    assert remote.predict(frame) == inline.predict(frame)
    assert pool.starts == 2 and pool.pool_fits == 3


def test_warm_started_fits_go_through_the_pool_too() -> None:
    config = SMALL.model_copy(update={"warm_start": True, "full_search_every": 3})
    frame = last_180_days("BTC/USDT")
    later = pd.concat([frame.iloc[6:], frame.iloc[:0]])
    pool = FitPool(1)
    try:
        remote = CryptoRegimeModel(config, fitter=pool.fit)
        remote.fit(frame)
        remote.fit(later)  # warm: starts from the first fit's parameters, sent to the worker
    finally:
        pool.close()
    inline = CryptoRegimeModel(config)
    inline.fit(frame)
    inline.fit(later)
    assert remote.last_report == inline.last_report
    assert remote.predict(later) == inline.predict(later)


def test_a_broken_pool_costs_an_inline_fit_not_a_different_one() -> None:
    frame, _ = two_regime_candles()
    pool = FitPool(1)
    try:
        executor = pool._executor()
        executor.submit(_exit_worker)  # the worker dies: the pool is broken
        result = pool.fit(SMALL, frame, 5)
        again = pool.fit(SMALL, frame, 5)  # a new pool
    finally:
        pool.close()
    assert result[0] == fit_hmm(SMALL, frame, 5)[0] == again[0]
    assert pool.inline_fits + pool.pool_fits == 2 and pool.pool_fits >= 1


def _exit_worker() -> None:
    import os

    os._exit(3)


def test_daemon_fit_workers_follow_the_setting() -> None:
    assert daemon_fit_workers(None) == 1
    assert daemon_fit_workers(0) == 0
    assert daemon_fit_workers(2) == 2
