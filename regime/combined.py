"""The combined regime: crypto volatility x macro quadrant, its label and the exposure scale.

``label`` is ``<crypto label>_<macro quadrant>`` in lower case, e.g. ``low_volatility_goldilocks``,
``high_volatility_unavailable``, ``unknown_unavailable``: the learner keys its per-regime posteriors
on it and the journal records it.

``exposure_scale = crypto exposure x macro exposure``: both views scale risk independently, so they
multiply. It ranges from 0.36 (high volatility in stagflation) to 1.2 (low volatility in goldilocks);
an unknown / unavailable side contributes 1.0, so a missing view never shrinks or grows exposure. The
risk caps multiply their exposure budget by it; the hard caps (position_pct <= 0.20 and the rest)
still apply after scaling, so a scale above 1 can never lift a position past them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from regime.crypto_hmm import CryptoRegime
from regime.macro import MacroRegime


class CombinedRegime(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    crypto: CryptoRegime
    macro: MacroRegime

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return f"{self.crypto.label.value}_{self.macro.quadrant.value}".lower()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exposure_scale(self) -> float:
        return self.crypto.exposure * self.macro.exposure

    def unavailable(self) -> dict[str, str]:
        """Why a side has no view (empty when both have one)."""
        reasons: dict[str, str] = {}
        if self.crypto.reason is not None:
            reasons["crypto_regime"] = self.crypto.reason
        if self.macro.reason is not None:
            reasons["macro_regime"] = self.macro.reason
        return reasons

    def describe(self) -> dict[str, Any]:
        """Plain JSON-ready data for the MarketSnapshot (missing figures are null, with a reason)."""
        crypto, macro = self.crypto, self.macro
        return {
            "label": self.label,
            "exposure_scale": round(self.exposure_scale, 4),
            "crypto": {
                "label": crypto.label.value,
                "exposure": crypto.exposure,
                "state": crypto.state,
                "n_states": crypto.n_states,
                "probability": _rounded(crypto.probability),
                "fitted_at_ms": crypto.fitted_at_ms,
                "as_of_ms": crypto.as_of_ms,
            },
            "macro": {
                "quadrant": macro.quadrant.value,
                "exposure": macro.exposure,
                "source": macro.source,
                "as_of_ms": macro.as_of_ms,
                "growth_yoy_pct": _rounded(macro.growth_yoy_pct),
                "growth_trend_yoy_pct": _rounded(macro.growth_trend_yoy_pct),
                "inflation_yoy_pct": _rounded(macro.inflation_yoy_pct),
                "inflation_prior_yoy_pct": _rounded(macro.inflation_prior_yoy_pct),
            },
            "unavailable": self.unavailable(),
        }


def combine(crypto: CryptoRegime, macro: MacroRegime) -> CombinedRegime:
    return CombinedRegime(crypto=crypto, macro=macro)


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


__all__ = ["CombinedRegime", "combine"]
