"""Builds the decision context: the analysts (analysts.db), the three tiers and the prompt assembler.

``--no-memory`` (``Ports.memory`` False) leaves every memory tier and the analysts out: the prompt is
the instructions and the snapshot, so a run with and without memory is a real experiment.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.analyst_summariser import ClaudeSummariser
from agent.decision_context import DecisionContext
from agent.prompt_assembly import PromptAssembler
from core.clock import Clock
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk
from memory.context import ContextAssembler, InsightSource
from memory.session_store import SESSION_WRITE_BEHIND, SessionStore
from memory.tiers import OrganisationTier, ProjectTier
from runner.agent_wiring import Agents
from runner.config import Settings


def build_decision_context(
    settings: Settings,
    clock: Clock,
    agents: Agents,
    *,
    memory: bool,
    person_notes: Callable[[], str],
    insights: InsightSource | None = None,
) -> DecisionContext | None:
    config = settings.context
    if not config.enabled:
        return None
    if not memory:
        return DecisionContext(
            PromptAssembler(None, settings.prompt, compact_snapshot=settings.agent.compact_snapshot)
        )
    state_dir = settings.state_dir
    desk = None
    if config.analysts:
        model = None
        if config.model_summaries and agents.client is not None:
            model = ClaudeSummariser(agents.client, settings.agent, agents.decider.ledger)
        store = AnalystStore(state_dir / "analysts.db", durable=settings.state.fsync_journals)
        desk = AnalystDesk(store, settings.market.tickers, model)
    session = SessionStore(
        state_dir / "sessions",
        clock,
        default_ttl_secs=config.session_ttl_secs,
        durable=settings.state.fsync_journals,
        # not durable (replay): files written every SESSION_WRITE_BEHIND sets and at shutdown
        write_behind=0 if settings.state.fsync_journals else SESSION_WRITE_BEHIND,
    )
    project = ProjectTier(state_dir)
    assembler = ContextAssembler(
        organisation=OrganisationTier(config.organisation_path),
        project=project,
        session=session,
        analysts=desk,
        insights=insights,
        person_notes=person_notes,
        insights_per_ticker=config.insights_per_ticker,
    )
    return DecisionContext(
        PromptAssembler(
            assembler, settings.prompt, compact_snapshot=settings.agent.compact_snapshot
        ),
        analysts=desk,
        session=session,
        project=project,
    )
