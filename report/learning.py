"""What the run learned, from its decision lines: the learner's posterior mean per signal over
time, how often the learned weights changed a decision, and how often the decider disagreed with
the regime model.

- **Learned weights** (per signal, unitless in [0, 1]): at each decision, the posterior mean of the
  signal in the table in force for each ticker (``snapshot.ts_posteriors.tickers``), averaged
  over the tickers that have it. The rule-based decider scales a signal's blend weight by
  ``0.5 + draw``, a Thompson draw from that posterior, so ``0.5 + mean`` is the multiplier it
  applies on average: above 0.5 the signal gets more say than the fixed blend gives it. A
  decision whose snapshot has no learner (``--no-memory``) or nothing learned yet adds no point.
- **Decisions the learner moved**: decision lines with a ticker decision whose reasoning says
  "The learner moved this decision" (the fallback writes it when the learned weights changed the
  action against the fixed blend).
- **Regime agreement**: decision lines by ``raw_decision.regime_agreement``: true, false, or not
  said (null, or an answer from before it was a boolean).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict

MOVED_MARK: Final = "The learner moved this decision"
_NUMBERS: Final = (int, float)


class LearningFigures(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: signal -> (at_ms, mean posterior mean over tickers), one point per decision that had one
    weights: dict[str, list[tuple[int, float]]]
    decisions_with_learner: int
    moved_decisions: int
    regime_agreement: dict[str, int]  # "agreed", "disagreed", "not said"


def projected_learning(record: dict[str, Any]) -> dict[str, Any]:
    """The few fields of a decision line these figures need (a line is ~8 kB; this ~100 B)."""
    snapshot = record.get("snapshot")
    raw = record.get("raw_decision")
    kept: dict[str, Any] = {"learned": _mean_by_signal(snapshot), "moved": False}
    if isinstance(raw, dict):
        kept["agreement"] = raw.get("regime_agreement")
        decisions = raw.get("decisions")
        kept["moved"] = isinstance(decisions, list) and _moved(decisions)
    return kept


def _moved(decisions: list[Any]) -> bool:
    for decision in decisions:
        if isinstance(decision, dict):
            reasoning = decision.get("reasoning", "")
            if MOVED_MARK in (reasoning if type(reasoning) is str else str(reasoning)):
                return True
    return False


def _mean_by_signal(snapshot: object) -> dict[str, float] | None:
    if not isinstance(snapshot, dict):
        return None
    posteriors = snapshot.get("ts_posteriors")
    tickers = posteriors.get("tickers") if isinstance(posteriors, dict) else None
    if not isinstance(tickers, dict):
        return None
    sums: dict[str, list[float]] = {}
    for view in tickers.values():
        signals = view.get("signals") if isinstance(view, dict) else None
        for name, entry in signals.items() if isinstance(signals, dict) else ():
            mean = entry.get("mean") if isinstance(entry, dict) else None
            if type(mean) is not float:  # the journal's case, taken without a call
                if not isinstance(mean, _NUMBERS):
                    continue
                mean = float(mean)
            if not 0.0 <= mean <= 1.0:  # not a Beta posterior's mean: corrupt, and 1e308 + 1e308
                continue  # would be an infinite point no chart can draw
            found = sums.get(name)
            if found is None:
                sums[name] = [mean]
            else:
                found.append(mean)
    return {name: sum(values) / len(values) for name, values in sorted(sums.items())}


def learning_figures(decisions: Sequence[dict[str, Any]]) -> LearningFigures:
    """From projected decision lines in time order."""
    weights: dict[str, list[tuple[int, float]]] = defaultdict(list)
    with_learner = moved = 0
    agreement = {"agreed": 0, "disagreed": 0, "not said": 0}
    for record in decisions:
        learning = record.get("learning", {})
        learned = learning.get("learned")
        if learned is not None:
            with_learner += 1
            at_ms = int(record["at_ms"])
            for name, mean in learned.items():
                weights[name].append((at_ms, mean))
        moved += bool(learning.get("moved"))
        said = learning.get("agreement")
        key = "agreed" if said is True else "disagreed" if said is False else "not said"
        agreement[key] += 1
    return LearningFigures(
        weights=dict(sorted(weights.items())),
        decisions_with_learner=with_learner,
        moved_decisions=moved,
        regime_agreement=agreement,
    )
