"""Builds the deciders: Claude (when a key is configured) in front of the rule-based fallback, and
the position reviewer for the tracker's agent layer, sharing one client, breaker and cost ledger."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from agent.breaker import CircuitBreaker
from agent.budget import DailyBudget
from agent.claude import NO_API_KEY, ClaudeDecider, UsageLedger
from agent.claude_client import (
    DEFAULT_BACKOFF,
    ClaudeClient,
    Credentials,
    RetryPolicy,
    build_anthropic_client,
)
from agent.claude_review import ClaudePositionReviewer
from agent.claude_schema import WakeRules
from agent.claude_wire import usable_key
from agent.config import AgentConfig
from agent.debate import DebateDecider
from agent.debate_memory import InProcessMemory, LongTermMemory
from agent.fallback import FallbackPipeline
from agent.fallback_decider import FallbackDecider, HistorySource
from api.cost import spent_usd
from core.bus import EventBus
from core.clock import Clock
from core.errors import RefuseToStartError
from core.redact import Redactor
from core.regular_file import read_regular_text
from runner.config import SECRET_FILE_MAX_BYTES, Settings, secrets_dir_now

log = logging.getLogger(__name__)

#: an API key is about a hundred characters; a key file holding more is not one (the bound of a
#: secret file in VIGIL_SECRETS_DIR, which holds the same keys)
KEY_FILE_MAX_BYTES = SECRET_FILE_MAX_BYTES


@dataclass
class Agents:
    decider: ClaudeDecider | DebateDecider
    reviewer: ClaudePositionReviewer | None
    client: ClaudeClient | None


def anthropic_key_reader(configured: str) -> Callable[[], str | None]:
    """Reads the key as it is now: the file named by ``ANTHROPIC_API_KEY_FILE``, else the
    environment's ``ANTHROPIC_API_KEY``, else the secrets dir's ``anthropic_api_key``, else the
    key the daemon started with. Read at each breaker trial, so a rotation needs no restart. A
    key file is read only as a small regular file (``core.regular_file``): a FIFO there blocked
    the start (or, at a trial, the event loop) until someone wrote to it, and a huge file was read
    whole; each is now an ``OSError`` saying what is there."""

    def read() -> str | None:
        named = os.environ.get("ANTHROPIC_API_KEY_FILE")
        if named:
            return _read_key_file(Path(named))
        from_env = os.environ.get("ANTHROPIC_API_KEY")
        if from_env:
            return from_env.strip()
        secrets_dir = secrets_dir_now()
        if secrets_dir is not None and (secrets_dir / "anthropic_api_key").is_file():
            return _read_key_file(secrets_dir / "anthropic_api_key")
        return configured

    return read


def _read_key_file(path: Path) -> str | None:
    # utf-8-sig: an editor's byte order mark is no part of the key
    text = read_regular_text(path, encoding="utf-8-sig", max_bytes=KEY_FILE_MAX_BYTES)
    return text.strip() or None


def wake_rules(settings: Settings) -> WakeRules:
    """The wake conditions this daemon's gate holds: its tickers' metrics, its cap. The answers
    are checked against them and the prompts list them."""
    return WakeRules.of(settings.market.tickers, settings.gate.max_wake_conditions)


def build_agents(
    settings: Settings,
    clock: Clock,
    bus: EventBus,
    history: HistorySource,
    journal: Callable[[Mapping[str, Any]], None],
    *,
    memory: bool = True,
    long_term: LongTermMemory | None = None,
    jitter: random.Random | None = None,
) -> Agents:
    """``memory`` False (``--no-memory``): the debate neither recalls nor writes long-term memory.
    ``long_term``: the debate's store (default: in the process, lost at exit, until the
    composition root gives it the memory graph: ``DebateDecider.use_long_term``).
    ``jitter``: draws the Claude client's retry jitter (``Ports.jitter``)."""
    config = settings.agent
    fallback = FallbackDecider(FallbackPipeline(), history, NO_API_KEY)
    client = build_client(settings, clock, jitter)
    breaker = CircuitBreaker(clock, config.breaker_failures, config.breaker_open_secs)
    ledger = _ledger(config, clock, settings.logs_dir / "decisions.jsonl", client is not None)
    redactor = Redactor(settings.secret_values())
    wake = wake_rules(settings)
    decider: ClaudeDecider | DebateDecider
    if config.decider == "debate":
        decider = DebateDecider(
            client=client,
            config=config,
            clock=clock,
            fallback=fallback,
            breaker=breaker,
            ledger=ledger,
            memory=(long_term or InProcessMemory()) if memory else None,
            redactor=redactor,
            wake=wake,
        )
    else:
        decider = ClaudeDecider(
            client=client,
            config=config,
            clock=clock,
            fallback=fallback,
            breaker=breaker,
            ledger=ledger,
            bus=bus,
            redactor=redactor,
            wake=wake,
        )
    reviewer = None
    if client is not None:  # without a key the tracker's fallback score reviews positions
        reviewer = ClaudePositionReviewer(
            client=client,
            config=config,
            clock=clock,
            breaker=breaker,
            ledger=ledger,
            bus=bus,
            journal=journal,
            redactor=redactor,
        )
    return Agents(decider=decider, reviewer=reviewer, client=client)


def configured_key(settings: Settings) -> SecretStr | None:
    """The key, from the setting or from ``ANTHROPIC_API_KEY_FILE``; a file without a usable key
    refuses the start."""
    key = settings.anthropic_api_key
    named = os.environ.get("ANTHROPIC_API_KEY_FILE")
    if key is None and named:  # a key only in a secret file
        try:
            from_file = anthropic_key_reader("")()
        except (OSError, UnicodeDecodeError) as exc:
            raise RefuseToStartError(
                f"ANTHROPIC_API_KEY_FILE={named}: the Anthropic API key cannot be read: {exc}"
            ) from None
        if from_file is not None and not usable_key(from_file):
            raise RefuseToStartError(
                f"ANTHROPIC_API_KEY_FILE={named}: holds no usable Anthropic API key (one line "
                "of printable ASCII without spaces)"
            )
        key = SecretStr(from_file) if from_file else None
    return key


def build_client(
    settings: Settings, clock: Clock, jitter: random.Random | None = None
) -> ClaudeClient | None:
    """The one Claude client of the deciders and the reviewer; None without a key (the decider
    itself then says so, once, when built). ``jitter`` draws its retries' jitter."""
    config = settings.agent
    key = configured_key(settings)
    if key is None:
        return None
    tries = config.debate.llm_max_retries if config.decider == "debate" else config.max_attempts
    policy = RetryPolicy(
        backoff=DEFAULT_BACKOFF.model_copy(update={"max_attempts": tries}),
        retry_after_cap_secs=config.retry_after_cap_secs,
    )
    client = ClaudeClient(
        build_anthropic_client(config, key.get_secret_value()),
        clock,
        config,
        policy,
        jitter,
        credentials=Credentials(
            read_key=anthropic_key_reader(key.get_secret_value()),
            build=lambda new_key: build_anthropic_client(config, new_key),
        ),
    )
    log.info(
        "Claude decides (%s, %s; daily budget %s); the rule-based pipeline takes over on failure",
        config.decider,
        config.model,
        config.budget_text,
    )
    return client


def _ledger(config: AgentConfig, clock: Clock, journal: Path, calls_models: bool) -> UsageLedger:
    """The cost ledger over the daily budget (``auto``: what is left of the month, per day),
    counting what the journal says was spent today and this month before the start: a daemon
    restarted (or crash-looping) used to get the whole day's budget again at each start."""
    auto = config.daily_budget_usd == "auto"
    today_usd, month_before_usd = _spent_before_start(journal, clock) if calls_models else (0, 0)
    if today_usd or month_before_usd:
        log.info(
            "Claude spend already journaled: US$ %.4f today, US$ %.4f earlier this month; the "
            "budget counts it",
            today_usd,
            month_before_usd,
        )
    return UsageLedger(
        DailyBudget(
            clock,
            None if auto or config.daily_budget_usd == "auto" else config.daily_budget_usd,
            monthly_usd=config.monthly_budget_usd if auto else None,
            spent_this_month_usd=month_before_usd,
            spent_today_usd=today_usd,
        )
    )


def _spent_before_start(journal: Path, clock: Clock) -> tuple[float, float]:
    try:
        return spent_usd(journal, clock.now_ms())
    except OSError as exc:  # a damaged segment: the API's figures say 409 for it, a start goes on
        log.warning(
            "the journal's spend cannot be read (%s): the daily budget counts from 0 this start",
            exc,
        )
        return 0.0, 0.0
