"""Claude's EXIT / ADD / HOLD per open position, for the tracker's 3-minute agent layer.

Same client, breaker, budget and validation rules as the decider. When Claude cannot answer
(no key, budget spent, breaker open, a failed call) this raises ``ClaudeUnavailable`` with the
reason: the tracker then gives every position its fallback score's verdict and logs why. Reviews for
positions that were not asked about, twice, with an unknown action or not of the schema's shape are
dropped one by one (the tracker's fallback covers the positions left without a verdict).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from agent.breaker import BreakerState, CircuitBreaker
from agent.budget import add_usage
from agent.claude import NO_API_KEY, UsageLedger, gate_reason, redact_attempts, spend_check
from agent.claude_client import Attempt, CallFailed, ClaudeClient, ModelGone
from agent.claude_prompt import RawReview, render_review_request
from agent.claude_schema import AnswerInvalid, parse_answer_json
from agent.config import AgentConfig
from agent.review_delta import UNCHANGED, ReviewDelta
from agent.risk import TickerError, normalize_ticker
from core.bus import EventBus
from core.clock import Clock
from core.events import AgentFailure
from core.redact import Redactor
from gate.conditions import render_raw
from state.records import ReviewRecord
from tracker.ports import PositionReview, ReviewAction, ReviewVerdict

log = logging.getLogger(__name__)


class ClaudeUnavailable(RuntimeError):
    """Claude gave no review this time; the message says why (for the tracker's log)."""


class _Envelope(BaseModel):
    """The answer's shape (``RawReviewAnswer``'s) with each review checked on its own: one the
    schema refuses (a reason past 500 characters, a field missing) failed the whole answer, every
    position's review with it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reviews: list[Any]


def parse_reviews(text: str, asked: Sequence[str]) -> list[ReviewVerdict]:
    try:
        answer = _Envelope.model_validate(parse_answer_json(text))
    except ValidationError as exc:
        raise AnswerInvalid("schema_mismatch", str(exc)[:300]) from None
    verdicts: dict[str, ReviewVerdict] = {}
    for entry in answer.reviews:
        try:
            raw = RawReview.model_validate(entry)
            ticker = normalize_ticker(raw.ticker)
            action = ReviewAction(raw.action.strip().upper())
        except (TickerError, ValueError) as exc:  # a ValidationError is a ValueError
            why = " ".join(str(exc).split())[:200]
            log.warning("claude review dropped (%s): %s", why, render_raw(entry))
            continue
        if ticker not in asked or ticker in verdicts:
            log.warning("claude review for %s dropped: not asked, or twice", ticker)
            continue
        verdicts[ticker] = ReviewVerdict(
            ticker=ticker, action=action, reason=raw.reason, decided_by="claude"
        )
    return list(verdicts.values())


class ClaudePositionReviewer:
    """``tracker.ports.PositionReviewer`` over Claude."""

    def __init__(
        self,
        *,
        client: ClaudeClient | None,
        config: AgentConfig,
        clock: Clock,
        breaker: CircuitBreaker,
        ledger: UsageLedger,
        bus: EventBus | None = None,
        journal: Callable[[Mapping[str, Any]], None] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._journal = journal  # one line per review call: its usage joins the running totals
        self._redactor = redactor or Redactor()
        self._client = client
        self._config = config
        self._clock = clock
        self.breaker = breaker
        self.ledger = ledger
        self._bus = bus
        self.delta = ReviewDelta(config.delta)

    async def review(
        self, positions: Sequence[PositionReview], context: Mapping[str, object]
    ) -> Sequence[ReviewVerdict]:
        if not positions:
            return []
        blocked = gate_reason(self._client, self.ledger, self.breaker, self._clock)
        if blocked is not None or self._client is None:
            raise ClaudeUnavailable(blocked or NO_API_KEY)
        now_secs = self._clock.monotonic_secs()
        self.delta.forget([p.ticker for p in positions])
        changed, kept = self.delta.split(positions, now_secs)
        if kept:  # nothing moved for these since the last review: no call, the journal says so
            unchanged = [p for p in positions if p not in changed]
            self._write(unchanged, (), kept, context, decided_by=UNCHANGED)
        if not changed:  # no call: a half-open trial slot gate_reason took goes to the next one
            self.breaker.release_trial()
            return kept
        positions = changed
        asked = [p.ticker for p in positions]
        request = render_review_request(self._config, positions, context)
        trial = self.breaker.state is BreakerState.HALF_OPEN
        try:
            with self.breaker.guard():  # every way out of the call gives the breaker a verdict
                try:
                    if trial:  # a rotated key takes effect at the trial, not at a restart
                        await self._client.refresh_credentials()
                    result = await self._client.call_chain(
                        request,
                        lambda text: parse_reviews(text, asked),
                        self._config.failover_models,
                        spend=spend_check(self.ledger),
                    )
                except ModelGone:
                    raise  # no call went out: the guard gives no verdict, nothing is billed
                except CallFailed as failure:
                    # a try's detail may quote model text: journaled and published, so redacted
                    attempts = redact_attempts(failure.attempts, self._redactor)
                    self._failed(attempts)
                    self._write(positions, attempts, (), context)
                    raise ClaudeUnavailable(f"claude_failed: {failure.kind}") from None
                self.breaker.record_success()
        except ModelGone as gone:  # said once already, by the client
            raise ClaudeUnavailable(f"claude_failed: {gone}") from None
        self.ledger.record(result.attempts, failed=False)
        # only what Claude gave a verdict on is the reference: a position the answer left out
        # (or whose review was dropped) is asked again, not kept as if reviewed
        judged = {v.ticker for v in result.value}
        self.delta.reviewed([p for p in positions if p.ticker in judged], now_secs)
        verdicts = [self._redacted(v) for v in result.value]
        self._write(positions, redact_attempts(result.attempts, self._redactor), verdicts, context)
        return [*verdicts, *kept]

    def _redacted(self, verdict: ReviewVerdict) -> ReviewVerdict:
        """A verdict's reason is model text the tracker logs and the journal keeps: no secret."""
        reason, count = self._redactor.redact(verdict.reason)
        return verdict.model_copy(update={"reason": reason}) if count else verdict

    def _write(
        self,
        positions: Sequence[PositionReview],
        attempts: Sequence[Attempt],
        verdicts: Sequence[ReviewVerdict],
        context: Mapping[str, object],
        decided_by: str | None = None,
    ) -> None:
        if self._journal is None:
            return
        usage = None
        for attempt in attempts:
            usage = add_usage(usage, attempt.usage)
        self._journal(
            ReviewRecord(
                at_ms=self._clock.now_ms(),
                tickers=[p.ticker for p in positions],
                decided_by=decided_by or ("claude" if verdicts else "fallback"),
                usage=usage.model_dump(mode="json") if usage is not None else None,
                attempts=[a.model_dump(mode="json") for a in attempts],
                verdicts=[v.model_dump(mode="json") for v in verdicts],
                positions=[p.model_dump(mode="json") for p in positions],
                context=orjson.loads(orjson.dumps(dict(context), default=str)),
            ).model_dump(mode="json")
        )

    def _failed(self, attempts: list[Attempt]) -> None:
        self.breaker.record_failure(attempts[-1].kind)
        self.ledger.record(attempts, failed=True)
        for attempt in attempts:
            log.warning("claude review failure: %s: %s", attempt.kind, attempt.detail)
            if self._bus is not None:
                self._bus.publish(
                    AgentFailure(
                        at_ms=self._clock.now_ms(),
                        kind=f"review_{attempt.kind}",
                        detail=attempt.detail,
                    )
                )
