"""The fitted HMM's posterior without hmmlearn's model class: a daemon that predicts but does not fit
never imports scikit-learn and SciPy (about 95 MB of resident memory; the fit runs in a child
process, ``regime.fit_pool``).

``last_posterior`` is ``GaussianHMM.predict_proba(X, lengths)[-1]`` for a diag model and hmmlearn's
default "log" implementation, computed the way hmmlearn 0.3 computes it so the floats are the same
bits: the emission log-densities are hmmlearn's ``_log_multivariate_normal_density_diag``, the
forward pass is hmmlearn's own compiled ``_hmmc.forward_log`` (a small extension module that imports
nothing of scikit-learn), and the normalisation is SciPy's ``logsumexp`` steps for a real row. Only
the last sequence is scored: the rows of earlier sequences do not enter the last row's posterior, and
the backward lattice's last row is zero. ``tests/unit/test_regime_hmm_predict.py`` holds it to
hmmlearn's result bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hmmlearn import _hmmc

Array = np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True)
class HmmParams:
    """A fitted diag GaussianHMM's parameters, in the fit window's scaled feature units."""

    startprob: Array  # (n,)
    transmat: Array  # (n, n)
    means: Array  # (n, d)
    covars: Array  # (n, d): the diagonal variances (hmmlearn's ``_covars_`` for "diag")

    @property
    def n_states(self) -> int:
        return int(self.startprob.shape[0])

    @classmethod
    def of(cls, hmm: Any) -> HmmParams:
        """The parameters of a fitted ``hmmlearn.hmm.GaussianHMM`` (covariance type "diag")."""
        return cls(
            startprob=np.array(hmm.startprob_, dtype=np.float64),
            transmat=np.array(hmm.transmat_, dtype=np.float64),
            means=np.array(hmm.means_, dtype=np.float64),
            covars=np.array(hmm._covars_, dtype=np.float64),
        )


def last_posterior(params: HmmParams, scaled: Array, lengths: list[int]) -> Array:
    """The state posterior of the last row of ``scaled`` (rows split into ``lengths`` sequences)."""
    rows = np.ascontiguousarray(scaled[len(scaled) - lengths[-1] :], dtype=np.float64)
    log_frameprob = _log_density_diag(rows, params.means, params.covars)
    _, fwdlattice = _hmmc.forward_log(params.startprob, params.transmat, log_frameprob)
    log_gamma = np.array(fwdlattice[-1:], dtype=np.float64)  # + the backward lattice's last row, 0
    log_gamma -= _logsumexp_rows(log_gamma)
    with np.errstate(under="ignore"):
        posterior: Array = np.exp(log_gamma)[0]
    return posterior


def _log_density_diag(rows: Array, means: Array, covars: Array) -> Array:
    """hmmlearn.stats._log_multivariate_normal_density_diag, the same floats: its
    ``((rows[:, None, :] - means) ** 2 / covars).sum(axis=-1)`` is taken feature by feature,
    each a (rows, states) array squared and divided in place, and added up left to right as
    NumPy's sum of a short axis adds (a third of the time: no (rows, states, features) temporaries
    and no reduction over an axis of three)."""
    _, n_features = means.shape
    covars = np.maximum(covars, np.finfo(float).tiny)
    with np.errstate(over="ignore"):
        distance: Array | None = None
        for k in range(n_features):
            term: Array = rows[:, k, None] - means[:, k]
            term *= term
            term /= covars[:, k]
            if distance is None:
                distance = term
            else:
                distance += term
        assert distance is not None  # a model has at least one feature
        density: Array = -0.5 * (
            n_features * np.log(2 * np.pi) + np.log(covars).sum(axis=-1) + distance
        )
    return density


def _logsumexp_rows(a: Array) -> Array:
    """scipy.special.logsumexp(a, axis=1, keepdims=True) for real rows, step for step (SciPy
    1.15+): the largest term (m of them when tied) is taken out and the rest summed through log1p;
    a non-finite result falls back to log(sum(exp(a)))."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out_inf = np.log(np.sum(np.exp(a), axis=1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        a_max = np.max(a, axis=1, keepdims=True)
        is_max = a == a_max
        others = np.where(is_max, -np.inf, a)
        m = np.sum(is_max.astype(a.dtype), axis=1, keepdims=True, dtype=a.dtype)
        s = np.sum(np.exp(others - a_max), axis=1, keepdims=True, dtype=a.dtype)
        s = np.where(s == 0, s, s / m)
        out: Array = np.log1p(s) + np.log(m) + a_max
    return np.where(np.isfinite(out), out, out_inf)


__all__ = ["HmmParams", "last_posterior"]
