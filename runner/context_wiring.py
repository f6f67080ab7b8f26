"""Builds the decision context: the analysts (analysts.db), the three tiers and the prompt assembler.

``--no-memory`` (``Ports.memory`` False) leaves every memory tier and the analysts out: the prompt is
the instructions and the snapshot, so a run with and without memory is a real experiment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any

from agent.analyst_summariser import ClaudeSummariser
from agent.decision_context import DecisionContext
from agent.prompt_assembly import PromptAssembler
from core.clock import Clock
from core.redact import Redactor
from memory.analyst_store import AnalystStore
from memory.analysts import AnalystDesk
from memory.context import ContextAssembler, InsightSource
from memory.port import StoreUnavailableError
from memory.session_store import SESSION_WRITE_BEHIND, SessionStore
from memory.tiers import OrganisationTier, ProjectTier
from runner.agent_wiring import Agents, wake_rules
from runner.config import Settings
from runner.desk_ahead import DeskAhead

log = logging.getLogger(__name__)

#: MEMORY.md and rules/ looked at at most once a second of real time (a person's edit is seen
#: within it; a replay's decisions, milliseconds apart, no longer stat both files each)
PROJECT_RECHECK_SECS = 1.0


def build_decision_context(
    settings: Settings,
    clock: Clock,
    agents: Agents,
    *,
    memory: bool,
    person_notes: Callable[[], str],
    insights: InsightSource | None = None,
    analysts_pool: Executor | None = None,
    journal: Callable[[Mapping[str, Any]], None] | None = None,
) -> DecisionContext | None:
    """``analysts_pool``: replay's process for the analysts (``runner.desk_ahead``), used when
    the store is not durable and no model summarises (a model's summaries stay here).
    ``journal``: the decisions journal, where each model summary's call is a line."""
    config = settings.context
    if not config.enabled:
        return None
    if not memory:
        return DecisionContext(
            PromptAssembler(
                None,
                settings.prompt,
                compact_snapshot=settings.agent.compact_snapshot,
                wake=wake_rules(settings),
            )
        )
    state_dir = settings.state_dir
    desk: AnalystDesk | None = None
    if config.analysts:
        model = None
        if config.model_summaries and agents.client is not None:
            model = ClaudeSummariser(
                agents.client,
                settings.agent,
                agents.decider.ledger,
                Redactor(settings.secret_values()),
                clock=clock,
                journal=journal,
            )
        path = state_dir / "analysts.db"
        durable = settings.state.fsync_journals
        try:
            store = AnalystStore(path, durable=durable)
        except StoreUnavailableError as exc:
            store = None
            log.error(
                "analysts: %s; deciding without the analysts' reports and day summaries (move "
                "the file away and restart to start them afresh)",
                exc,
            )
        if store is None:
            desk = None
        elif analysts_pool is not None and model is None and not durable:
            desk = DeskAhead(store, str(path), settings.market.tickers, analysts_pool)
        else:
            desk = AnalystDesk(store, settings.market.tickers, model)
    session = SessionStore(
        state_dir / "sessions",
        clock,
        default_ttl_secs=config.session_ttl_secs,
        durable=settings.state.fsync_journals,
        # not durable (replay): files written every SESSION_WRITE_BEHIND sets and at shutdown
        write_behind=0 if settings.state.fsync_journals else SESSION_WRITE_BEHIND,
    )
    project = ProjectTier(state_dir, recheck_secs=PROJECT_RECHECK_SECS, real_secs=time.monotonic)
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
            assembler,
            settings.prompt,
            compact_snapshot=settings.agent.compact_snapshot,
            wake=wake_rules(settings),
        ),
        analysts=desk,
        session=session,
        project=project,
    )
