"""``OnlineLearner``: Thompson sampling over signal sources, global and per-regime Beta posteriors.

Every closed trade (``position.exit``) updates, for each signal the entry carried, the global
posterior and the posterior of the trade's regime, with the seed's arithmetic (``thompson.py``).

Decisions the seed leaves open, made here:

- **pnl units**: ``update`` takes ``pnl_pct`` in PERCENT, as ``PositionExit`` reports it, and
  divides by 100: the formula's pnl is a fraction (+5 % -> 0.05, reward = sigmoid(0.5)).
- **which posteriors are discounted**: the discount is part of each per-signal update, so only
  the posteriors of signals that voted on this trade (present and non-zero) are discounted. A
  signal absent from a trade, or exactly 0, keeps its posterior untouched: the trade says
  nothing about it, and discounting it would wash out evidence about a signal merely because
  other signals traded.
- **regime vs global**: ``sample_weights(regime)`` and ``posteriors(regime)`` use the regime's
  posteriors once that regime has ``min_regime_trades`` recorded trades (counted per regime, not
  per signal), else the global ones. The signals sampled are every signal the learner has seen;
  one never seen in the regime in force has the prior Beta(prior_alpha, prior_beta) there.
- **no regime**: a trade with regime ``None``, ``""`` or ``unknown`` updates only the global
  posteriors.
- **one regime key**: every regime given to the learner, to learn or to read, goes through
  ``learner.regime_key.regime_key`` (a combined label keys by its volatility level), so the
  tracker's exits and the snapshot's look-ups always meet.
- **the draw**: ``draw(regime, rng)`` is one Thompson sample per signal, the raw Beta draws in
  (0, 1); ``sample_weights`` is the same draw normalised to sum 1.

The model is saved atomically after every update when a path is given; a save that fails is
logged and retried at the next update (the learning stays in memory meanwhile).
"""

from __future__ import annotations

import logging
import math
import random
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NamedTuple

from core.errors import RefuseToStartError
from core.events import Event, PositionExit
from learner.model_file import (
    MAX_REGIMES,
    MAX_SIGNALS,
    InvalidLearnerFileError,
    LearnerFile,
    PosteriorRecord,
    TradeRecord,
    read_learner_file,
    write_learner_file,
)
from learner.regime_key import regime_key, rekeyed
from learner.thompson import BetaPosterior, outcome_for
from state.atomic import remove_stale_tmp_files

log = logging.getLogger(__name__)

Table = dict[str, BetaPosterior]
InForce = Literal["regime", "global"]


class _Reading(NamedTuple):
    """What ``posteriors`` and ``draw`` read for one regime key, kept until the next learning."""

    in_force: InForce
    #: (name, alpha, beta) in name order: the draw's parameters
    params: tuple[tuple[str, float, float], ...]
    #: name -> the posterior as ``posteriors`` shows it (copied for each caller)
    shown: dict[str, dict[str, Any]]


class OnlineLearner:
    def __init__(
        self,
        path: Path | None,
        *,
        prior_alpha: float = 1.0,
        prior_beta: float = 1.0,
        discount: float = 0.95,
        window: int = 50,
        min_regime_trades: int = 3,
    ) -> None:
        if not (prior_alpha > 0 and prior_beta > 0 and math.isfinite(prior_alpha + prior_beta)):
            raise ValueError(f"priors must be finite and > 0, got {prior_alpha}, {prior_beta}")
        if not 0 < discount <= 1:
            raise ValueError(f"discount must be in (0, 1], got {discount}")
        if window < 1 or min_regime_trades < 0:
            raise ValueError(
                f"window must be >= 1 and min_regime_trades >= 0, got {window}, {min_regime_trades}"
            )
        self._path = path
        self._prior = BetaPosterior(prior_alpha, prior_beta)
        self._discount = discount
        self._min_regime_trades = min_regime_trades
        self._global: Table = {}
        self._regimes: dict[str, Table] = {}
        self._regime_counts: dict[str, int] = {}
        self._trades: deque[TradeRecord] = deque(maxlen=window)
        #: ``_trades`` as compact dicts, made again only after they change (every decision's
        #: snapshot shows the newest of them)
        self._trade_dicts: list[dict[str, Any]] | None = None
        #: regime key -> what is read of the posteriors in force (every decision reads each
        #: ticker's; they change only when a trade is learned, which empties this)
        self._readings: dict[str | None, _Reading] = {}
        self._unsaved = False
        if path is not None:
            self._load(path)

    # -- learning ---------------------------------------------------------------------------

    def update(
        self,
        signals: Mapping[str, float],
        pnl_pct: float,
        regime: str | None,
        ticker: str,
        at_ms: int,
        holding_secs: float,
        *,
        trade_id: str | None = None,
    ) -> bool:
        """Learn from one closed trade. ``pnl_pct`` is in percent (+5 % is 5.0). Returns False
        (and learns nothing) when ``trade_id`` is one of the recent trades already learned: an
        exit delivered again after a restart is learned exactly once.

        Raises ``ValueError`` (and learns nothing) on a non-finite pnl or signal value.
        """
        if trade_id is not None and any(t.trade_id == trade_id for t in self._trades):
            log.info("learner: trade %s of %s was already learned; skipped", trade_id, ticker)
            return False
        regime = regime_key(regime)
        # Both validate (ValueError) before anything changes, so a bad trade leaves no trace.
        record = TradeRecord(
            ticker=ticker,
            at_ms=at_ms,
            pnl_pct=pnl_pct,
            holding_secs=holding_secs,
            regime=regime,
            signals=dict(signals),
            trade_id=trade_id,
        )
        pnl_fraction = pnl_pct / 100.0
        outcomes = {name: outcome_for(value, pnl_fraction) for name, value in signals.items()}
        self._check_room(
            regime, [name for name, outcome in outcomes.items() if outcome is not None]
        )
        regime_table = self._regimes.setdefault(regime, {}) if regime is not None else None
        for name, outcome in outcomes.items():
            if outcome is None:
                continue  # a signal of exactly 0 did not vote: its posteriors stay as they are
            self._global[name] = self._global.get(name, self._prior).updated(
                outcome, self._discount
            )
            if regime_table is not None:
                regime_table[name] = regime_table.get(name, self._prior).updated(
                    outcome, self._discount
                )
        if regime is not None:
            self._regime_counts[regime] = self._regime_counts.get(regime, 0) + 1
        self._trades.append(record)
        self._trade_dicts = None
        self._readings.clear()
        self._unsaved = True
        self._save_or_log()
        return True

    def _check_room(self, regime: str | None, names: list[str]) -> None:
        """``ValueError`` when learning ``names`` in ``regime`` would grow the model past what
        ``read_learner_file`` loads: entry signals come from a state file a person may edit, and
        a model saved past the bound would refuse the next start."""
        new = sum(name not in self._global for name in names)
        if len(self._global) + new > MAX_SIGNALS:
            raise ValueError(
                f"learning {new} new signal(s) would make more than {MAX_SIGNALS} signals"
            )
        if regime is not None and regime not in self._regimes and len(self._regimes) >= MAX_REGIMES:
            raise ValueError(f"a new regime {regime!r} would make more than {MAX_REGIMES} regimes")

    def on_position_exit(self, event: Event, trade_id: str | None = None) -> None:
        """Learn one ``position.exit`` (the daemon feeds it from the exits outbox, with the
        exit's key as ``trade_id``); fit for an inline bus subscription too.

        Cost per exit: ~10 us of arithmetic plus the atomic save (~1 ms with fsync, measured on
        the dev box); exits are rare and never on the tick path.
        """
        if not isinstance(event, PositionExit):
            raise TypeError(f"on_position_exit expects PositionExit, got {type(event).__name__}")
        self.update(
            event.signals,
            event.pnl_pct,
            event.regime,
            event.ticker,
            event.at_ms,
            event.holding_secs,
            trade_id=trade_id,
        )

    # -- reading ----------------------------------------------------------------------------

    def draw(self, regime: str | None, rng: random.Random) -> dict[str, float]:
        """One Thompson draw per signal from the posteriors in force, each in [0, 1].

        Signals are drawn in name order, so the result depends only on the state and ``rng``.
        Empty when no trade has been learned yet.
        """
        return {name: rng.betavariate(a, b) for name, a, b in self._reading(regime).params}

    def sample_weights(self, regime: str | None, rng: random.Random) -> dict[str, float]:
        """``draw`` normalised to sum 1 (empty when no trade has been learned yet)."""
        draws = self.draw(regime, rng)
        if not draws:
            return {}
        total = sum(draws.values())
        if total <= 0:
            # Only reachable when every draw underflows to 0.0 (alphas driven near 0 by long
            # losing streaks): the draws then carry no ranking, so the weights are equal.
            log.warning("learner: every Thompson draw was 0 (regime %r); equal weights", regime)
            return {name: 1.0 / len(draws) for name in draws}
        return {name: draw / total for name, draw in draws.items()}

    def posteriors(self, regime: str | None) -> dict[str, Any]:
        """The posteriors in force for ``regime`` and which table they come from (for snapshots)."""
        regime = regime_key(regime)
        reading = self._reading(regime)
        return {
            "in_force": reading.in_force,
            "regime": regime,
            "regime_trades": self._regime_counts.get(regime, 0) if regime else 0,
            "min_regime_trades": self._min_regime_trades,
            "signals": {name: dict(shown) for name, shown in reading.shown.items()},
        }

    def recent_trades(self, last: int | None = None) -> list[dict[str, Any]]:
        """The last ``window`` trades (the newest ``last`` of them when given), oldest first, as
        compact dicts (pnl_pct in percent): new dicts each call, the caller's to change."""
        if self._trade_dicts is None:
            self._trade_dicts = [trade.model_dump(exclude={"trade_id"}) for trade in self._trades]
        dicts = self._trade_dicts
        start = 0 if last is None else max(0, len(dicts) - max(last, 0))
        return [{**trade, "signals": dict(trade["signals"])} for trade in dicts[start:]]

    @property
    def regime_counts(self) -> dict[str, int]:
        """Trades learned per regime, over the learner's whole life (not only the window)."""
        return dict(self._regime_counts)

    @property
    def unsaved(self) -> bool:
        """True when the latest learning has not reached the file yet (a save failed)."""
        return self._unsaved

    def _reading(self, regime: str | None) -> _Reading:
        key = regime_key(regime)
        reading = self._readings.get(key)
        if reading is None:
            in_force, table = self._in_force(key)
            ordered = sorted(table.items())
            reading = self._readings[key] = _Reading(
                in_force,
                tuple((name, p.alpha, p.beta) for name, p in ordered),
                {
                    name: {"alpha": p.alpha, "beta": p.beta, "mean": p.mean, "trades": p.trades}
                    for name, p in ordered
                },
            )
        return reading

    def _in_force(self, regime: str | None) -> tuple[InForce, Table]:
        regime = regime_key(regime)
        if regime and self._regime_counts.get(regime, 0) >= self._min_regime_trades:
            regime_table = self._regimes.get(regime, {})
            return "regime", {name: regime_table.get(name, self._prior) for name in self._global}
        return "global", dict(self._global)

    # -- persistence --------------------------------------------------------------------------

    def save(self) -> None:
        """Write the model now (atomic). Raises ``OSError``; a no-op without a path."""
        if self._path is None:
            self._unsaved = False
            return
        write_learner_file(self._path, self._to_file())
        self._unsaved = False

    def _save_or_log(self) -> None:
        try:
            self.save()
        except OSError:
            log.exception(
                "learner: could not save %s; the learning is kept in memory and the next "
                "update tries again",
                self._path,
            )

    def _to_file(self) -> LearnerFile:
        return LearnerFile(
            global_posteriors=_records(self._global),
            regime_posteriors={r: _records(t) for r, t in self._regimes.items()},
            regime_counts=dict(self._regime_counts),
            recent_trades=list(self._trades),
        )

    def _load(self, path: Path) -> None:
        try:
            for stale in remove_stale_tmp_files(path):
                log.info("learner: removed %s left by an interrupted save", stale)
            model = read_learner_file(path)
        except (InvalidLearnerFileError, OSError) as exc:
            raise RefuseToStartError(
                f"learner model {path} cannot be used ({exc}); it was left untouched: fix it, "
                "or move it away to start learning from scratch"
            ) from exc
        if model is None:
            log.info("learner: no model at %s yet, starting from the prior", path)
            return
        try:
            regimes, dropped = rekeyed(dict(model.regime_posteriors))
            counts, dropped_counts = rekeyed(dict(model.regime_counts))
        except ValueError as exc:
            raise RefuseToStartError(
                f"learner model {path} cannot be used ({exc}); it was left untouched: merge "
                "them by hand, or move the file away to start learning from scratch"
            ) from None
        if dropped or dropped_counts:
            log.warning(
                "learner: %s: regime keys that are no regime, not loaded: %s",
                path,
                sorted({*dropped, *dropped_counts}),
            )
        self._global = _posteriors(model.global_posteriors)
        self._regimes = {r: _posteriors(t) for r, t in regimes.items()}
        self._regime_counts = counts
        # the deque keeps only the last ``window``; each regime as update keys it, as the tables
        self._trades.extend(
            trade.model_copy(update={"regime": regime_key(trade.regime)})
            for trade in model.recent_trades
        )
        self._trade_dicts = None
        self._readings.clear()
        log.info(
            "learner: loaded %s (%d signals, %d regimes, %d recent trades)",
            path,
            len(self._global),
            len(self._regimes),
            len(self._trades),
        )


def _records(table: Table) -> dict[str, PosteriorRecord]:
    return {
        name: PosteriorRecord(alpha=p.alpha, beta=p.beta, trades=p.trades)
        for name, p in table.items()
    }


def _posteriors(records: Mapping[str, PosteriorRecord]) -> Table:
    return {name: BetaPosterior(r.alpha, r.beta, r.trades) for name, r in records.items()}
