"""Claude as the decider: ask, validate, convert; on anything else, the fallback decides and says why.

Order of checks for each snapshot: no API key -> ``no_api_key``; daily budget spent ->
``budget_spent``; breaker open -> ``breaker_open``; otherwise one call (bounded retries, see
``agent.claude_client``). A routine answer that would enter is asked again of the strong model only
while the budget, counting the first call, allows it; else the fallback decides with
``budget_spent``. A failed call counts against the breaker, is published as
``agent.failure`` per failed try, and the fallback decides with ``claude_failed: <kind>``: never a
silent HOLD. The returned decision always lists the tries in ``attempts`` and the billed ``usage``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from agent.breaker import BreakerState, CircuitBreaker
from agent.budget import DailyBudget, UsageTotals, add_usage
from agent.claude_client import (
    Attempt,
    CallFailed,
    ClaudeClient,
    ModelGone,
    SpendCheck,
    billed_usd,
    nothing_sent,
)
from agent.claude_prompt import render_request
from agent.claude_schema import (
    DEFAULT_WAKE_RULES,
    Note,
    WakeRules,
    convert_answer,
    parse_answer_json,
)
from agent.config import AgentConfig
from agent.decision import AgentDecision, Usage
from agent.fallback_decider import FallbackDecider
from agent.materiality import DeltaGate
from agent.prompt_assembly import AssembledPrompt
from agent.snapshot import MarketSnapshot
from agent.tiers import choose_model, opens_position
from core.bus import EventBus
from core.clock import Clock
from core.events import AgentFailure
from core.redact import Redactor
from gate.conditions import clean_reason

log = logging.getLogger(__name__)

NO_API_KEY = "no_api_key"
_NO_USAGE = Usage()  # frozen: the zero totals of a ledger that has billed nothing yet


class UsageLedger:
    """Running call, token and cost totals; shared by the decider and the position reviewer."""

    def __init__(self, budget: DailyBudget) -> None:
        self.budget = budget
        self._calls = 0
        self._failed_calls = 0
        self._usage: Usage | None = None
        self._cost_total_usd = 0.0

    def record(self, attempts: list[Attempt], failed: bool) -> Usage | None:
        """Count one call (all its tries) and return the usage billed for it; a call none of
        whose tries went out (a retired model not asked again) is no call: nothing counted."""
        if nothing_sent(attempts):
            return None
        self._calls += 1
        self._failed_calls += int(failed)
        usage: Usage | None = None
        for attempt in attempts:
            usage = add_usage(usage, attempt.usage)
        if usage is not None:
            self._usage = add_usage(self._usage, usage)
            self._cost_total_usd += usage.cost_usd
            self.budget.spend(usage.cost_usd)
        return usage

    def totals_dump(self) -> dict[str, Any]:
        """``totals().model_dump()`` made directly (tested against it): every decision's journal
        line reads the totals, and the two models (the usage and the totals) were most of the
        status' cost. The same keys in the same order, the values as the fields coerce them."""
        u = self._usage or _NO_USAGE
        return {
            "calls": int(self._calls),
            "failed_calls": int(self._failed_calls),
            "input_tokens": int(u.input_tokens),
            "output_tokens": int(u.output_tokens),
            "cache_creation_input_tokens": int(u.cache_creation_input_tokens),
            "cache_read_input_tokens": int(u.cache_read_input_tokens),
            "cost_total_usd": float(self._cost_total_usd),
            "cost_today_usd": float(self.budget.spent_today_usd),
        }

    def totals(self) -> UsageTotals:
        u = self._usage or Usage()
        return UsageTotals(
            calls=self._calls,
            failed_calls=self._failed_calls,
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_creation_input_tokens=u.cache_creation_input_tokens,
            cache_read_input_tokens=u.cache_read_input_tokens,
            cost_total_usd=self._cost_total_usd,
            cost_today_usd=self.budget.spent_today_usd,
        )


def model_status(enabled: bool, breaker: CircuitBreaker, ledger: UsageLedger) -> dict[str, Any]:
    """What every model-backed decider reports: on or off (and why), breaker, budget, totals."""
    budget = ledger.budget
    return {
        "enabled": enabled,
        "disabled_reason": "" if enabled else NO_API_KEY,
        "breaker": breaker.state.value,
        "budget_limit_usd": budget.limit_usd,
        "budget_exhausted": budget.exhausted(),
        **ledger.totals_dump(),
    }


def gate_reason(
    client: ClaudeClient | None, ledger: UsageLedger, breaker: CircuitBreaker, clock: Clock
) -> str | None:
    """Why no call may go out now (None: it may; in half-open this takes the trial slot)."""
    if client is None:
        return NO_API_KEY
    spent = budget_spent_reason(ledger.budget)
    if spent is not None:
        return spent
    if not breaker.allow():
        return f"breaker_open: next trial in {breaker.reopens_in_secs():.0f} s"
    return None


def spend_check(ledger: UsageLedger, unbilled: Callable[[], float] = lambda: 0.0) -> SpendCheck:
    """A call's budget check before each retry (``ClaudeClient.call``): what its tries cost,
    plus ``unbilled()`` (earlier calls of the same decision), on top of what the ledger billed."""
    return lambda cost: budget_spent_reason(ledger.budget, cost + unbilled())


def budget_spent_reason(budget: DailyBudget, unbilled_usd: float = 0.0) -> str | None:
    """Why the day's budget allows no call now (None: it does); ``unbilled_usd``: what calls of
    this decision cost that the ledger has not billed yet."""
    limit, spent = budget.limit_usd, budget.spent_today_usd + unbilled_usd
    if limit is None or spent < limit:
        return None
    resets = datetime.fromtimestamp(budget.resets_at_ms() / 1000, UTC).isoformat()
    return f"budget_spent: ${spent:.4f} of ${limit:.2f} today, Claude again from {resets}"


class ClaudeDecider:
    """``Decider`` over Claude. ``client`` None means no API key: every decision is the fallback's."""

    def __init__(
        self,
        *,
        client: ClaudeClient | None,
        config: AgentConfig,
        clock: Clock,
        fallback: FallbackDecider,
        breaker: CircuitBreaker,
        ledger: UsageLedger,
        bus: EventBus | None = None,
        redactor: Redactor | None = None,
        wake: WakeRules = DEFAULT_WAKE_RULES,
    ) -> None:
        self._client = client
        self._redactor = redactor or Redactor()
        self._wake = wake
        self._config = config
        self._clock = clock
        self._fallback = fallback
        self.breaker = breaker
        self.ledger = ledger
        self._bus = bus
        self.delta = DeltaGate(config.delta)
        if client is None:
            log.warning(
                "Claude is disabled (no ANTHROPIC_API_KEY set); the fallback pipeline decides"
            )

    @property
    def enabled(self) -> bool:
        return self._client is not None

    def totals(self) -> UsageTotals:
        return self.ledger.totals()

    def status(self) -> dict[str, Any]:
        """For the status line and the journal: enabled, breaker, budget, running totals."""
        return {
            **model_status(self.enabled, self.breaker, self.ledger),
            "breaker_transitions": [
                t.model_dump(mode="json") for t in self.breaker.transitions[-10:]
            ],
            "unchanged_decisions": self.delta.skipped,
        }

    async def aclose(self) -> None:
        """Close the HTTP connections (at shutdown)."""
        if self._client is not None:
            await self._client.aclose()

    def render_request(self, snapshot: MarketSnapshot) -> dict[str, Any]:
        """Exactly what ``messages.create`` would get for ``snapshot`` (no secrets in it)."""
        return render_request(self._config, snapshot, wake=self._wake)

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        sent = snapshot.as_sent()
        if self._client is not None:  # the fallback is free: delta gating spares calls only
            unchanged = self.delta.unchanged(sent)
            if unchanged is not None:
                return unchanged
        blocked = gate_reason(self._client, self.ledger, self.breaker, self._clock)
        if blocked is not None or self._client is None:
            return self._fallback.decide_now(snapshot, blocked or NO_API_KEY)
        trial = self.breaker.state is BreakerState.HALF_OPEN
        prices = {ticker: view.price for ticker, view in snapshot.tickers.items()}

        def parse(text: str) -> tuple[AgentDecision, list[Note]]:
            return convert_answer(parse_answer_json(text), prices=prices, wake=self._wake)

        # the tier shows in the usage's model ("haiku+sonnet": an entry asked again)
        model, _why = choose_model(self._config.model, self._config.tiers, snapshot)
        attempts: list[Attempt] = []
        spent: str | None = None  # the first call spent the budget the escalation needed
        spend = spend_check(self.ledger, lambda: billed_usd(attempts))
        with self.breaker.guard():  # every way out of the call gives the breaker a verdict
            try:
                if trial:  # a key rotated while the breaker was open must not keep Claude off
                    await self._client.refresh_credentials()

                def request(model: str) -> dict[str, Any]:
                    if prompt is None:
                        return render_request(self._config, snapshot, model, self._wake)
                    return prompt.request(self._config, model)

                result = await self._client.call_chain(
                    request(model), parse, self._config.failover_models, spend=spend
                )
                attempts.extend(result.attempts)
                if self._escalate(model, result.value[0], snapshot):
                    spent = self._escalation_refused(model, attempts)
                    if spent is None:
                        model = self._config.model
                        result = await self._client.call_chain(
                            request(model), parse, self._config.failover_models, spend=spend
                        )
                        attempts.extend(result.attempts)
            except CallFailed as failure:
                if isinstance(failure, ModelGone) and not attempts:
                    # no call went out: nothing to bill, the breaker is not told, said once already
                    return self._fallback.decide_now(snapshot, f"claude_failed: {failure}")
                return self._failed(snapshot, [*attempts, *failure.attempts])
            except Exception as exc:  # a bug or an SDK surprise must still end in a decision
                log.exception("claude decider: unexpected error")
                attempt = Attempt(
                    attempt=1, outcome="failed", kind="unexpected_error", detail=repr(exc)[:500]
                )
                return self._failed(snapshot, [*attempts, attempt])
            self.breaker.record_success()
        usage = self.ledger.record(attempts, failed=False)
        attempts = self._redacted(attempts)
        if spent is not None:  # the cheap answer would enter unchecked: the rules decide instead
            decision = self._fallback.decide_now(snapshot, spent)
            return decision.model_copy(
                update={"usage": usage, "attempts": _journal_attempts(attempts, [])}
            )
        decision, notes = redact_decision(*result.value, self._redactor)
        self.delta.answered(sent, decision)
        return decision.model_copy(
            update={
                "decider_reason": "answered (breaker trial)" if trial else "answered",
                "usage": usage,
                "attempts": _journal_attempts(attempts, notes),
            }
        )

    def _escalate(self, model: str, decision: AgentDecision, snapshot: MarketSnapshot) -> bool:
        tiers = self._config.tiers
        return (
            tiers.escalate_entries
            and model != self._config.model
            and opens_position(decision, snapshot)
        )

    def _escalation_refused(self, model: str, attempts: list[Attempt]) -> str | None:
        """The budget's refusal of the escalated call, counting what the first call just cost
        (the ledger bills a decision's calls once it is done): None when the budget allows it."""
        spent = budget_spent_reason(self.ledger.budget, billed_usd(attempts))
        if spent is None:
            return None
        return f"{spent}; the {model} entry was not asked of {self._config.model}"

    def _redacted(self, attempts: list[Attempt]) -> list[Attempt]:
        return redact_attempts(attempts, self._redactor)

    def _failed(self, snapshot: MarketSnapshot, attempts: list[Attempt]) -> AgentDecision:
        attempts = self._redacted(attempts)
        last = attempts[-1]
        self.breaker.record_failure(last.kind)
        usage = self.ledger.record(attempts, failed=True)
        for attempt in attempts:
            if attempt.outcome == "failed":
                self._publish_failure(attempt)
        reason = f"claude_failed: {last.kind}"
        if self.breaker.state is BreakerState.OPEN:
            reason += f"; breaker open for {self.breaker.reopens_in_secs():.0f} s"
        decision = self._fallback.decide_now(snapshot, reason)
        return decision.model_copy(
            update={"usage": usage, "attempts": _journal_attempts(attempts, [])}
        )

    def _publish_failure(self, attempt: Attempt) -> None:
        log.warning("claude failure: %s: %s", attempt.kind, attempt.detail)
        if self._bus is not None:
            self._bus.publish(
                AgentFailure(at_ms=self._clock.now_ms(), kind=attempt.kind, detail=attempt.detail)
            )


def redact_attempts(attempts: list[Attempt], redactor: Redactor) -> list[Attempt]:
    """The tries with secrets out of their details: a detail quotes the start of an answer that
    is not JSON, model text like any other, journaled and published."""
    out = []
    for attempt in attempts:
        detail, count = redactor.redact(attempt.detail)
        out.append(attempt.model_copy(update={"detail": detail}) if count else attempt)
    return out


def redact_decision(
    decision: AgentDecision, notes: list[Note], redactor: Redactor
) -> tuple[AgentDecision, list[Note]]:
    """Model-written text without secrets before anything stores, journals or re-sends it; each
    redaction is a note."""
    total = 0

    def clean(text: str) -> str:
        nonlocal total
        cleaned, count = redactor.redact(text)
        total += count
        return cleaned

    trades = tuple(
        d.model_copy(update={"reasoning": clean(d.reasoning)}) for d in decision.decisions
    )
    update: dict[str, Any] = {
        "decisions": trades,
        "market_assessment": clean(decision.market_assessment),
        "regime_agreement_reason": clean(decision.regime_agreement_reason),
        "learning_note": clean(decision.learning_note),
        # kept by the gate and named in the next prompt: one line within its cap once redacted
        "wake_conditions": tuple(
            {**c, "reason": clean_reason(clean(c["reason"]))}
            if isinstance(c.get("reason"), str)
            else c
            for c in decision.wake_conditions
        ),
    }
    if decision.memory_update is not None:
        update["memory_update"] = clean(decision.memory_update)
    # a note quotes what it dropped (a rejected wake condition, a ticker as written)
    notes = [
        n.model_copy(update={"ticker": clean(n.ticker), "reason": clean(n.reason)}) for n in notes
    ]
    if not total:
        return decision, notes
    note = Note(what="redaction", reason=f"{total} secret(s) taken out of the model's text")
    return decision.model_copy(update=update), [*notes, note]


def _journal_attempts(attempts: list[Attempt], notes: list[Note]) -> tuple[dict[str, Any], ...]:
    rows = [a.model_dump(mode="json") for a in attempts]
    if notes and rows:
        rows[-1]["notes"] = [n.model_dump(mode="json") for n in notes]
    return tuple(rows)
