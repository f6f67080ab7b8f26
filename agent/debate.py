"""The debate decider: bull and bear argue, the trader decides, the manager reviews (``Decider``).

Per decision: ``bb_rounds`` rounds in which bull and bear each see the snapshot, their memories, the
working memory and the other side's argument of the previous round (so the two of one round do not
depend on each other and run concurrently); then the trader decides from both; then the manager
reviews all three and may only reduce the trader's sizes. The risk caps apply after all of it, in
the routine, as for every decider. Reflections of closed positions run at the start of the next
decision (inside the decision, so replay waits for them as for any call).

Each role call is one ``ClaudeClient.call_chain`` (``llm_max_retries`` tries, then the failover
models); a role whose call fails answers its fallback stub and the journal says so. A trader or
manager that fell back hands the decision to the rule-based decider with that reason: never a
silent HOLD. Every role's usage is billed to the ledger (the daily budget) and shown per role; a
role is asked only while the budget allows (spent mid-debate: the later roles are not asked, the
rule-based decider decides with ``budget_spent``, and exits not yet reflected on wait).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, cast

from pydantic import ValidationError

from agent.breaker import CircuitBreaker
from agent.budget import UsageTotals, add_usage
from agent.claude import (
    NO_API_KEY,
    UsageLedger,
    budget_spent_reason,
    gate_reason,
    model_status,
    spend_check,
)
from agent.claude_client import Attempt, CallFailed, ClaudeClient, nothing_sent
from agent.claude_schema import DEFAULT_WAKE_RULES, Note, WakeRules
from agent.config import AgentConfig
from agent.debate_apply import apply_manager, trader_decision
from agent.debate_config import Role
from agent.debate_memory import (
    Hygiene,
    LongTermMemory,
    Recalled,
    RecallQuery,
    WorkingItem,
    WorkingMemory,
)
from agent.debate_prompt import context_block, role_request, situation_text, snapshot_block
from agent.debate_record import RoleResult, debate_record
from agent.debate_roles import (
    ManagerOutput,
    RoleOutput,
    TraderOutput,
    fallback_output,
    output_text,
    parse_role_output,
)
from agent.debate_writes import MemoryWriter, reflection_context
from agent.decision import AgentDecision
from agent.fallback_decider import FallbackDecider
from agent.prompt_assembly import AssembledPrompt
from agent.snapshot import MarketSnapshot
from core.clock import Clock
from core.events import Event, PositionExit
from core.redact import Redactor

log = logging.getLogger(__name__)

MAX_REFLECTIONS_PER_DECISION = 3
#: a role's fallback reason when the day's budget kept it from being asked
BUDGET_SPENT = "budget_spent"


class DebateDecider:
    """``Decider`` over a debate of roles. ``client`` None (no key): the fallback decides."""

    def __init__(
        self,
        *,
        client: ClaudeClient | None,
        config: AgentConfig,
        clock: Clock,
        fallback: FallbackDecider,
        breaker: CircuitBreaker,
        ledger: UsageLedger,
        memory: LongTermMemory | None,
        redactor: Redactor | None = None,
        long_term: str | None = None,
        wake: WakeRules = DEFAULT_WAKE_RULES,
    ) -> None:
        """``long_term``: what ``memory`` is, for the status and the journal (default: its
        absence or ``in-process``)."""
        self._client = client
        self._wake = wake
        self._config = config
        self._debate = config.debate
        self._clock = clock
        self._fallback = fallback
        self.breaker = breaker
        self.ledger = ledger
        self._hygiene = Hygiene(redactor or Redactor(), config.debate.max_output_chars)
        self.use_long_term(memory, long_term)
        self.working = WorkingMemory(config.debate.working_mem_max)
        self._exits: list[PositionExit] = []
        self._budget_said_until_ms: int | None = None  # the budget day a spent budget was said
        #: role calls in flight (replay's busy probe: time may move only when all are parked)
        self.role_tasks: set[asyncio.Task[Any]] = set()

    def use_long_term(self, memory: LongTermMemory | None, description: str | None = None) -> None:
        """Recall from and write to ``memory`` from the next decision on (the composition root
        builds the memory store after the deciders)."""
        self._memory = memory
        self._writer = MemoryWriter(memory, self._debate, self._hygiene)
        self.long_term = description or ("off" if memory is None else "in-process, lost at exit")

    @property
    def enabled(self) -> bool:
        return self._client is not None

    def totals(self) -> UsageTotals:
        return self.ledger.totals()

    def status(self) -> dict[str, Any]:
        return {
            **model_status(self.enabled, self.breaker, self.ledger),
            "decider": "debate",
            "memory": self._memory is not None,
            "long_term_memory": self.long_term,
        }

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def on_position_exit(self, event: Event) -> None:
        """Inline bus handler: the exit's reflection runs at the start of the next decision."""
        if isinstance(event, PositionExit):
            self._exits.append(event)

    async def decide(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None = None
    ) -> AgentDecision:
        """``prompt``: the assembled context; its policy, memory and session parts go to every
        role as one more data block (the roles have their own instructions and snapshot)."""
        blocked = gate_reason(self._client, self.ledger, self.breaker, self._clock)
        if blocked is not None or self._client is None:
            return self._fallback.decide_now(snapshot, blocked or NO_API_KEY)
        with self.breaker.guard():  # the debate is one call for the breaker
            return await self._debate_once(snapshot, prompt)

    async def _debate_once(
        self, snapshot: MarketSnapshot, prompt: AssembledPrompt | None
    ) -> AgentDecision:
        if self._memory is None:  # memory OFF: no window carried from one decision to the next
            self.working = WorkingMemory(self._debate.working_mem_max)
        results: list[RoleResult] = []
        reflections = await self._reflect_pending(results)
        tickers = sorted(snapshot.tickers)
        context = snapshot_block(snapshot) + context_block(prompt)
        query = situation_text(snapshot)
        recalled = await self._recall_all(query, snapshot.at_ms)
        bull: RoleResult | None = None
        bear: RoleResult | None = None
        for round_no in range(1, self._debate.bb_rounds + 1):
            bull, bear = await self._round(
                round_no, context, recalled, bull, bear, tickers, snapshot.at_ms
            )
            results += [bull, bear]
        assert bull is not None and bear is not None  # bb_rounds >= 1
        trader = await self._ask(
            "trader",
            context,
            recalled["trader"],
            {"bull": _out(bull), "bear": _out(bear)},
            tickers,
            snapshot.at_ms,
        )
        results.append(trader)
        manager = await self._ask(
            "manager",
            context,
            recalled["manager"],
            {"bull": _out(bull), "bear": _out(bear), "trader": _out(trader)},
            tickers,
            snapshot.at_ms,
        )
        results.append(manager)
        return await self._conclude(snapshot, results, recalled, reflections)

    async def _round(
        self,
        round_no: int,
        context: str,
        recalled: Mapping[Role, list[Recalled]],
        bull: RoleResult | None,
        bear: RoleResult | None,
        tickers: list[str],
        at_ms: int,
    ) -> tuple[RoleResult, RoleResult]:
        """Bull and bear of one round, concurrently: each answers the other's previous argument."""
        bull_args = {"bear_last": _out(bear) if bear else None}
        bear_args = {"bull_last": _out(bull) if bull else None}
        async with asyncio.TaskGroup() as group:
            bull_task = self._spawn(group, "bull", context, recalled["bull"], bull_args, tickers)
            bear_task = self._spawn(group, "bear", context, recalled["bear"], bear_args, tickers)
        new_bull, new_bear = bull_task.result(), bear_task.result()
        for done in (new_bull, new_bear):  # in role order, whichever answered first
            self._keep(done, at_ms, tickers)
        return (
            new_bull.model_copy(update={"round": round_no}),
            new_bear.model_copy(update={"round": round_no}),
        )

    def _spawn(
        self,
        group: asyncio.TaskGroup,
        role: Role,
        context: str,
        memories: list[Recalled],
        arguments: Mapping[str, object],
        tickers: list[str],
    ) -> asyncio.Task[RoleResult]:
        task = group.create_task(self._ask(role, context, memories, arguments, tickers, at_ms=None))
        self.role_tasks.add(task)
        task.add_done_callback(self.role_tasks.discard)
        return task

    async def _ask(
        self,
        role: Role,
        context: str,
        memories: list[Recalled],
        arguments: Mapping[str, object],
        tickers: list[str],
        at_ms: int | None,
    ) -> RoleResult:
        """One role call; its fallback stub on any failure. With ``at_ms`` the output goes into
        the working memory at once (bull and bear of a round are added after both answered)."""
        assert self._client is not None
        request = role_request(
            self._config,
            role,
            context=context,
            memories=memories,
            working=self.working.items(),
            arguments=arguments,
            wake=self._wake,
        )

        # each role call is one more the day's budget must allow (checked once, a debate that
        # spent it in its first round asked every later role on top of it)
        spent_reason = budget_spent_reason(self.ledger.budget)
        not_asked = spent_reason is not None
        output: RoleOutput
        attempts: list[Attempt]
        notes: list[Note] = []  # the answer's items dropped on arrival
        if spent_reason is not None:
            output, attempts, reason = fallback_output(role, tickers), [], BUDGET_SPENT
        else:  # its failed answer's retry refused for the budget: said as the budget, once a day
            output, attempts, reason, notes, spent_reason = await self._call(role, request, tickers)
        if spent_reason is not None:
            self._say_budget_spent(spent_reason)
        if not reason:  # model text: no secret is kept, journaled or re-sent to the next role
            try:
                output = type(output).model_validate(
                    self._hygiene.redact_value(output.model_dump(mode="json"))
                )
                notes = [
                    Note.model_validate(self._hygiene.redact_value(n.model_dump())) for n in notes
                ]
            except ValidationError:  # a redaction marker pushed a field past its limit
                output, reason, notes = fallback_output(role, tickers), "unredactable", []
        # a retired model not asked again (ModelGone) was said once, by the client, and a spent
        # budget once a day (_say_budget_spent): repeated for each role, each was four to six
        # warnings a debate until the model changed or the day ended
        if reason and spent_reason is None and not nothing_sent(attempts):
            log.warning("debate: %s fell back (%s)", role, reason)
        usage = None if not_asked else self.ledger.record(attempts, failed=bool(reason))
        outcome = RoleResult(
            role=role,
            model=str(request["model"]),
            output=output,
            fell_back=bool(reason),
            reason=reason,
            usage=usage,
            # a try's detail quotes the start of an answer that is not JSON: model text too
            attempts=tuple(
                cast(dict[str, Any], self._hygiene.redact_value(a.model_dump(mode="json")))
                for a in attempts
            ),
            memories=tuple(memories),
            text=self._hygiene.clean(output_text(output)),
            notes=tuple(notes),
            budget_spent=spent_reason is not None,
        )
        if at_ms is not None:
            self._keep(outcome, at_ms, tickers)
        return outcome

    def _say_budget_spent(self, why: str) -> None:
        until_ms = self.ledger.budget.resets_at_ms()
        if self._budget_said_until_ms != until_ms:
            self._budget_said_until_ms = until_ms
            log.warning("debate: %s; no role is asked until then", why)

    async def _call(
        self, role: Role, request: dict[str, Any], tickers: list[str]
    ) -> tuple[RoleOutput, list[Attempt], str, list[Note], str | None]:
        """The role's output, its tries, why it fell back ("" when it answered), what of its
        answer was dropped on arrival, and the budget's reason when it refused a retry."""
        assert self._client is not None

        def parse(text: str) -> tuple[RoleOutput, list[Note]]:
            return parse_role_output(role, text)

        try:
            result = await self._client.call_chain(
                request, parse, self._config.failover_models, spend=spend_check(self.ledger)
            )
        except CallFailed as failure:
            stub = fallback_output(role, tickers)
            return stub, failure.attempts, failure.kind, [], failure.budget_spent
        except Exception as exc:  # a bug or an SDK surprise: this role falls back, loudly
            log.exception("debate: %s call failed unexpectedly", role)
            attempt = Attempt(
                attempt=1, outcome="failed", kind="unexpected_error", detail=repr(exc)[:300]
            )
            return fallback_output(role, tickers), [attempt], "unexpected_error", [], None
        output, notes = result.value
        return output, result.attempts, "", notes, None

    def _keep(self, result: RoleResult, at_ms: int, tickers: list[str]) -> None:
        ticker = tickers[0] if len(tickers) == 1 else None
        self.working.add(
            WorkingItem(content=result.text, role=result.role, ticker=ticker, created_at=at_ms)
        )

    async def _recall_all(self, query: str, now_ms: int) -> dict[Role, list[Recalled]]:
        roles: tuple[Role, ...] = ("bull", "bear", "trader", "manager")
        out: dict[Role, list[Recalled]] = {role: [] for role in roles}
        if self._memory is None or self._debate.memory_k == 0:
            return out
        for role in roles:
            try:
                out[role] = await self._memory.recall(
                    RecallQuery(
                        role=role,
                        role_weight=self._debate.role(role).memory_weight,
                        text=query,
                        ticker=None,
                        now_ms=now_ms,
                        k=self._debate.memory_k,
                    )
                )
            except Exception:  # a store that is down: the debate goes on without memories
                log.exception("debate: %s could not recall memories", role)
        return out

    async def _reflect_pending(self, results: list[RoleResult]) -> list[dict[str, Any]]:
        exits, self._exits = (
            self._exits[:MAX_REFLECTIONS_PER_DECISION],
            self._exits[MAX_REFLECTIONS_PER_DECISION:],
        )
        written = []
        for n, event in enumerate(exits):
            context, query = reflection_context(event)
            memories = (await self._recall_all(query, event.at_ms))["manager"]
            result = await self._ask(
                "reflection", context, memories, {}, [event.ticker], at_ms=None
            )
            if result.asked:  # its usage is the decision's, whether or not the lesson comes
                results.append(result)
            if result.budget_spent:  # not asked, or its retry refused: reflected on when the
                self._exits[:0] = exits[n:]  # budget allows (it was lost with the retry refused)
                break
            written.append({"ticker": event.ticker, **await self._writer.reflection(result, event)})
        return written

    async def _conclude(
        self,
        snapshot: MarketSnapshot,
        results: list[RoleResult],
        recalled: Mapping[Role, list[Recalled]],
        reflections: list[dict[str, Any]],
    ) -> AgentDecision:
        trader = next(r for r in results if r.role == "trader")
        manager = next(r for r in results if r.role == "manager")
        usage = None
        for result in results:
            usage = add_usage(usage, result.usage)
        # a role the budget or a retired model kept from asking is no failure of Claude's
        asked = [r for r in (trader, manager) if r.asked]
        failed_core = [r for r in asked if r.fell_back]
        if failed_core:
            self.breaker.record_failure(failed_core[0].reason)
        elif asked:
            self.breaker.record_success()
        writes = await self._writer.after_decision(results, snapshot.at_ms)
        record = debate_record(
            results, recalled, len(self.working), writes, reflections, self._debate.bb_rounds
        )
        record["long_term_memory"] = self.long_term
        if failed_core or len(asked) < 2:
            spent = budget_spent_reason(self.ledger.budget)
            if failed_core:
                why = ", ".join(f"{r.role} ({r.reason})" for r in failed_core)
                reason = f"debate_failed: {why} fell back"
            elif spent is None:
                why = ", ".join(f"{r.role} ({r.reason})" for r in (trader, manager) if not r.asked)
                reason = f"debate_failed: {why} not asked"
            else:
                reason = spent or BUDGET_SPENT
            decision = self._fallback.decide_now(snapshot, reason)
            return decision.model_copy(update={"usage": usage, "debate": record})
        assert isinstance(trader.output, TraderOutput)
        assert isinstance(manager.output, ManagerOutput)
        prices = {ticker: view.price for ticker, view in snapshot.tickers.items()}
        decision, notes = trader_decision(trader.output, prices, self._hygiene, self._wake)
        decision, more = apply_manager(decision, manager.output)
        dropped = [*trader.notes, *manager.notes]
        record["notes"] = [n.model_dump(mode="json") for n in [*dropped, *notes, *more]]
        return decision.model_copy(
            update={"usage": usage, "debate": record, "decider_reason": "debated"}
        )


def _out(result: RoleResult) -> dict[str, Any]:
    """A role's output as the next role reads it: its cleaned text and its fields."""
    return {"role": result.role, "text": result.text, "fell_back": result.fell_back}
