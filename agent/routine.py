"""The decision routine: snapshot -> decider -> risk caps -> broker -> gate -> journal -> state.

Single-flight: one decision at a time. Requests that arrive meanwhile (candle closes of three tickers,
a gate wake, the watchdog) are coalesced into the next run, which carries all their reasons. Each run
writes one complete line to ``decisions.jsonl``, also when it fails part-way, so the journal always
says what happened and why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import ValidationError

from agent.decision import AgentDecision, dumped_decisions
from agent.port import Decider
from agent.prompt_assembly import AssembledPrompt
from agent.risk import RiskConfig, RiskContext, TickerError, apply_risk_caps, normalize_ticker
from agent.snapshot import MarketSnapshot
from broker.port import Action, Broker, OrderIntent, OrderResult
from broker.resting import cancel_resting_buys
from broker.trading_state import TradingSwitch
from core.bus import EventBus
from core.clock import Clock
from core.errors import HaltTradingError, RetryableError
from core.events import DecisionMade
from core.failure_streak import FailureStreak
from memory.tiers import TierError
from state.decision_line import decision_line
from state.journal import PlainJson, plain_or_as_is
from state.records import DecisionRecord

log = logging.getLogger(__name__)


class GateUpdater(Protocol):
    def update_from_agent(
        self, next_check_seconds: float, wake_conditions: Sequence[Mapping[str, Any]]
    ) -> Any: ...


class Journal(Protocol):
    def append(self, record: Mapping[str, Any]) -> None: ...

    async def append_async(self, record: Mapping[str, Any]) -> None: ...


class PromptContext(Protocol):
    """Context around the decider (``agent.decision_context.DecisionContext``)."""

    async def prepare(self, snapshot: MarketSnapshot) -> AssembledPrompt: ...

    def after(self, decision: AgentDecision, at_ms: int) -> None: ...


class MemoryStore(Protocol):
    def set_agent_memory(self, text: str) -> str: ...

    def save(self) -> object: ...


class SnapshotSource(Protocol):
    """Builds the snapshot for one decision; ``decision_id`` seeds its Thompson draw."""

    def __call__(
        self, reasons: Sequence[str], /, *, decision_id: str
    ) -> Awaitable[MarketSnapshot]: ...


RiskContextSource = Callable[[MarketSnapshot], RiskContext]


class DecisionRoutine:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        *,
        build_snapshot: SnapshotSource,
        decider: Decider,
        agent_status: Callable[[], Mapping[str, Any]] | None = None,
        risk_context: RiskContextSource,
        risk_config: RiskConfig | Callable[[], RiskConfig],
        broker: Broker,
        gate: GateUpdater,
        journal: Journal,
        store: MemoryStore,
        failpoint: Callable[[str], None] = lambda _name: None,
        before_execution: Callable[[Sequence[OrderIntent]], Sequence[OrderIntent]] | None = None,
        after_execution: Callable[[Sequence[OrderIntent], Sequence[OrderResult]], Awaitable[None]]
        | None = None,
        trading: TradingSwitch | None = None,
        context: PromptContext | None = None,
    ) -> None:
        """``trading``: while it is HALTED no BUY is placed (SELLs still are), and a
        ``HaltTradingError`` from any step halts it. ``context``: assembles the prompt's parts."""
        self._context = context
        self._clock = clock
        self._bus = bus
        self._build_snapshot = build_snapshot
        self._decider = decider
        self._agent_status = agent_status
        self._risk_context = risk_context
        self._risk_config = risk_config
        self._broker = broker
        self._gate = gate
        self._journal = journal
        self._store = store
        self._before_execution = before_execution
        self._failpoint = failpoint
        self._after_execution = after_execution
        self._trading = trading
        self._unsaved = FailureStreak()
        self._pending: dict[str, None] = {}  # ordered set of reasons waiting for the next run
        self._wake = asyncio.Event()
        self._seq = 0
        self._deciding = False
        self._task: asyncio.Task[Any] | None = None
        self.runs = 0
        self.coalesced = 0
        self.failures = 0
        #: called with each journaled decision line and its real duration in seconds (the
        #: operator's metrics and live stream); an observer that raises is logged, never fatal
        self.observers: list[Callable[[Mapping[str, Any], float], None]] = []

    def request(self, reasons: Sequence[str]) -> None:
        """Ask for a decision; cheap and synchronous, callable from a tick handler."""
        if self._pending or self._wake.is_set():
            self.coalesced += 1
        for reason in reasons:
            self._pending[reason] = None
        self._wake.set()

    @property
    def pending_reasons(self) -> tuple[str, ...]:
        return tuple(self._pending)

    @property
    def deciding(self) -> bool:
        """A decision (maybe a Claude call) is in flight: replay keeps time still until it is done."""
        return self._deciding

    @property
    def task(self) -> asyncio.Task[Any] | None:
        """The task running the decision loop (replay asks whether it is parked on the clock)."""
        return self._task

    async def run(self) -> None:
        """The decision loop: one run at a time, each carrying every reason that piled up."""
        self._task = asyncio.current_task()
        while True:
            await self._wake.wait()
            self._wake.clear()
            reasons, self._pending = tuple(self._pending), {}
            if reasons:
                self._deciding = True
                try:
                    await self.decide_once(reasons)
                finally:
                    self._deciding = False

    async def decide_once(self, reasons: Sequence[str]) -> dict[str, Any]:
        at_ms = self._clock.now_ms()
        self._seq += 1
        decision_id = f"d{at_ms}-{self._seq}"
        started = time.perf_counter()  # logged, never journaled: replay journals must be identical
        record: dict[str, Any] = {
            "type": "decision",
            "decision_id": decision_id,
            "at_ms": at_ms,
            "trigger": list(reasons),
        }
        try:
            await self._decide(decision_id, reasons, record)
        except asyncio.CancelledError:
            record["error"] = "cancelled (shutdown) before the decision completed"
            self._write_now(record)
            raise
        except Exception as exc:
            self.failures += 1
            record["error"] = f"{type(exc).__name__}: {exc}"
            log.exception("decision %s failed", decision_id)
            if isinstance(exc, HaltTradingError) and self._trading is not None:
                self._trading.halt(f"decision {decision_id}: {exc}")
                record["trading"] = self._trading.state.mode
        self.runs += 1
        await self._write(record, started)
        return record

    async def _decide(
        self, decision_id: str, reasons: Sequence[str], record: dict[str, Any]
    ) -> None:
        snapshot = await self._build_snapshot(reasons, decision_id=decision_id)
        sent = snapshot.as_sent()  # what the decider reads, byte for byte, rounded once
        record["snapshot_digest"] = snapshot.digest()  # of ``sent``'s JSON, dumped once
        # plain already (a JSON dump, rounded, non-finite numbers refused), and kept unchanged:
        # the line is not validated, dumped and checked a second time for it
        record["snapshot"] = PlainJson(sent, snapshot.to_json_bytes())
        prompt = await self._prompt(snapshot, record)
        decision = await (
            self._decider.decide(snapshot)
            if prompt is None
            else self._decider.decide(snapshot, prompt=prompt)
        )
        record["decided_by"] = decision.decided_by
        record["decider_reason"] = decision.decider_reason
        raw = decision.model_dump(mode="json")
        # plain once checked: the line's model then neither validates nor dumps it again
        record["raw_decision"] = plain_or_as_is(raw)
        if decision.usage is not None:
            record["usage"] = decision.usage.model_dump(mode="json")
        if self._agent_status is not None:
            record["agent"] = dict(self._agent_status())  # breaker, budget, running totals

        caps = self._risk_config() if callable(self._risk_config) else self._risk_config
        outcome = apply_risk_caps(decision, self._risk_context(snapshot), caps, decision_id)
        record["accepted"] = [i.model_dump(mode="json") for i in outcome.intents]
        record["cap_changes"] = [c.model_dump(mode="json") for c in outcome.changes]
        # a SELL means out: a BUY limit of that ticker left resting would buy back in later
        cancelled = await cancel_resting_buys(self._broker, _sold_tickers(decision))
        if cancelled:
            record["cancelled"] = cancelled
        results = await self._execute(outcome.intents, record)
        record["orders"] = [r.model_dump(mode="json") for r in results]

        gate_update = self._gate.update_from_agent(
            decision.next_check_seconds, decision.wake_conditions
        )
        record["gate_update"] = _plain(gate_update)
        self._remember(decision, record)
        if self._context is not None:
            try:
                self._context.after(decision, snapshot.at_ms)
            except TierError as exc:
                # a file it leaves alone (MEMORY.md not UTF-8, too large) says so at every
                # decision that trades, until a person fixes it: its reason, not a traceback
                log.warning("context write-back for %s: %s", decision_id, exc)
                record["context_error"] = f"{type(exc).__name__}: {exc}"
            except Exception as exc:
                log.exception("context write-back failed for %s", decision_id)
                record["context_error"] = f"{type(exc).__name__}: {exc}"
        self._bus.publish(
            DecisionMade(
                at_ms=snapshot.at_ms,
                decision_id=decision_id,
                decided_by=decision.decided_by,
                decisions=dumped_decisions(decision, raw),
            )
        )
        _log_decision(decision_id, decision, reasons, results)

    async def _prompt(
        self, snapshot: MarketSnapshot, record: dict[str, Any]
    ) -> AssembledPrompt | None:
        """The assembled prompt (its sizes and trims into the journal line); a failure to assemble
        is reported and the decider gets the plain snapshot prompt."""
        if self._context is None:
            return None
        try:
            prompt = await self._context.prepare(snapshot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("prompt assembly failed; deciding on the snapshot alone")
            record["context_error"] = f"{type(exc).__name__}: {exc}"
            return None
        # plain (ints, strings and lists of them): not validated, dumped and walked again
        record["prompt"] = PlainJson(prompt.info.as_json())
        return prompt

    async def _execute(
        self, intents: Sequence[OrderIntent], record: dict[str, Any]
    ) -> Sequence[OrderResult]:
        if self._before_execution is not None:
            kept = self._before_execution(intents)
            skipped = [i for i in intents if i not in kept]
            if skipped:
                record["skipped"] = [
                    {"ticker": i.ticker, "action": i.action.value, "reason": "position not tracked"}
                    for i in skipped
                ]
            intents = kept
        intents = self._hold_entries_while_halted(intents, record)
        if not intents:
            return ()
        results = await self._broker.execute_decisions(intents)
        self._failpoint("after_orders_sent")
        if self._after_execution is not None:
            await self._after_execution(intents, results)
        return results

    def _hold_entries_while_halted(
        self, intents: Sequence[OrderIntent], record: dict[str, Any]
    ) -> Sequence[OrderIntent]:
        if self._trading is None or not self._trading.halted:
            return intents
        held = [i for i in intents if i.action is not Action.SELL]
        if held:
            why = f"trading halted: {self._trading.state.reason or 'no reason given'}"
            record.setdefault("skipped", []).extend(
                {"ticker": i.ticker, "action": i.action.value, "reason": why} for i in held
            )
            log.warning(
                "decision %s: %d entries not placed: %s", record["decision_id"], len(held), why
            )
        return [i for i in intents if i.action is Action.SELL]

    def _remember(self, decision: AgentDecision, record: dict[str, Any]) -> None:
        if decision.memory_update:
            record["memory_saved"] = self._store.set_agent_memory(decision.memory_update)
        try:
            self._store.save()
        except OSError as exc:
            # the orders went out already: the decision goes on (write-back, decision.made); the
            # state stays in memory for the next save, but a crash now would lose what the
            # tracker keeps of each position there, so nothing new opens until a person looks
            why = f"runner state could not be saved: {type(exc).__name__}: {exc}"
            record["state_error"] = why
            if self._unsaved.failed(str(exc)):  # said when it starts: not at every decision
                log.error("decision %s: %s; kept in memory", record["decision_id"], why)
            if self._trading is not None:
                if not self._trading.halted:
                    self._trading.halt(f"decision {record['decision_id']}: {why}")
                record["trading"] = self._trading.state.mode
            return
        except RetryableError as exc:
            # a person's editor rewriting the file through every attempt: nothing is broken, the
            # next save merges their edit and writes the state, so the decision goes on untouched
            why = f"runner state not saved yet: {exc}"
            record["state_error"] = why
            if self._unsaved.failed(str(exc)):
                log.warning("decision %s: %s; kept in memory", record["decision_id"], why)
            return
        if failures := self._unsaved.ended():
            log.warning("runner state saved again after %d failed saves", failures)

    async def _write(self, record: dict[str, Any], started: float) -> None:
        log.debug(
            "decision %s took %.1f ms", record["decision_id"], (time.perf_counter() - started) * 1e3
        )
        line = _typed_line(record)
        try:
            await self._journal.append_async(line)
        except Exception:
            log.exception("could not journal decision %s", record.get("decision_id"))
            return
        self._failpoint("after_decision_journaled")
        elapsed_secs = time.perf_counter() - started
        for observe in self.observers:
            try:
                observe(line, elapsed_secs)
            except Exception:
                log.exception("decision observer %r failed", observe)

    def _write_now(self, record: dict[str, Any]) -> None:
        """The line of a decision cancelled by shutdown, written before the cancellation goes on."""
        try:
            self._journal.append(_typed_line(record))
        except Exception:
            log.exception("could not journal decision %s", record.get("decision_id"))


def _typed_line(record: dict[str, Any]) -> dict[str, Any]:
    """The line as a ``DecisionRecord``. A record this code built that does not fit its own model
    is a bug: say so loudly, and still journal the line as it is, with the reason beside it.

    A ``PlainJson`` value (of an optional field: the snapshot as sent, the prompt's info, the
    JSON dumps of the decider's answer and of the gate update once checked plain) is plain
    already: None stands in for it while validating, and it goes back in its place."""
    exact = decision_line(record)  # the model's line, made without it when nothing would change
    if exact is not None:
        return exact
    vouched = {key: value for key, value in record.items() if isinstance(value, PlainJson)}
    try:
        if not vouched:
            return DecisionRecord.model_validate(record).as_line()
        # the keys stay where they were, for the observers
        line = DecisionRecord.model_validate({**record, **dict.fromkeys(vouched)}).as_line()
        line.update(vouched)
        return line
    except ValidationError as exc:
        log.error("decision %s does not fit DecisionRecord: %s", record.get("decision_id"), exc)
        return {**record, "record_invalid": str(exc)[:2000]}


def _sold_tickers(decision: AgentDecision) -> frozenset[str]:
    sold = set()
    for d in decision.decisions:
        if d.action is Action.SELL:
            try:
                sold.add(normalize_ticker(d.ticker))
            except TickerError:
                continue  # the caps journal the bad ticker
    return frozenset(sold)


def _log_decision(
    decision_id: str,
    decision: AgentDecision,
    reasons: Sequence[str],
    results: Sequence[OrderResult],
) -> None:
    if not log.isEnabledFor(logging.INFO):  # a replay logs warnings only: skip the summaries
        return
    log.info(
        "decision %s by %s (%s): %s; orders: %s",
        decision_id,
        decision.decided_by,
        ", ".join(reasons),
        _summary(decision),
        ", ".join(f"{r.side} {r.ticker} {r.status}" for r in results) or "none",
    )


def _summary(decision: AgentDecision) -> str:
    parts = [
        f"{d.action.value} {d.ticker}" + (f" {d.position_pct:.0%}" if d.position_pct else "")
        for d in decision.decisions
    ]
    return ", ".join(parts) or "no decisions"


def _plain(value: Any) -> Any:
    """A model's JSON dump (fresh: handed to the line once checked plain), anything else as it is."""
    dump = getattr(value, "model_dump", None)
    return plain_or_as_is(dump(mode="json")) if callable(dump) else value
