"""ContextAssembler: organisation -> project -> session, plus the analysts and the insights.

Values merge in that order, a later tier's non-empty value overriding an earlier one (caps are the
exception: the organisation's only tighten, see ``memory.tiers.tighten``). A tier that fails is
logged and skipped with its reason in ``tier_errors``: context never fails a decision. Every dated
item says how old it is; older than 3,600 s is marked stale, and so is one dated more than a minute
after now (its age unknown).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from core.unvalidated import require_plain, unvalidated
from memory.analyst_model import MemorySummary
from memory.analysts import AnalystDesk
from memory.port import reading
from memory.session_store import SessionStore, normalise_name
from memory.tiers import OrganisationTier, ProjectTier, TierError

log = logging.getLogger(__name__)

STALE_AFTER_SECS = 3600.0
#: how far ahead of now an item may be dated and still count as written now (a clock stepped
#: back); further ahead, its age is unknown
FUTURE_SLACK_SECS = 60.0
TIERS = ("organisation", "project", "session")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InsightItem(_Frozen):
    """One lesson of the trading memory, with the retrieval score that ranked it."""

    text: str
    score: float
    ticker: str | None = None
    insight_id: str = ""
    created_ms: int | None = None


class InsightSource(Protocol):
    """What the trading memory (#11) offers the prompt: its best lessons for a ticker and regime."""

    async def top_insights(self, ticker: str, regime: str | None, k: int) -> list[InsightItem]: ...


class SummaryItem(_Frozen):
    analyst: str
    ticker: str
    kind: str  # pre_open / post_close / today_report
    text: str
    made_at_ms: int | None


class Dated(_Frozen):
    at_ms: int | None
    age_secs: float | None
    stale: bool


require_plain(Dated, frozenset({"at_ms", "age_secs", "stale"}))


class AssembledContext(_Frozen):
    at_ms: int
    values: dict[str, str]  # merged organisation -> project -> session
    caps: dict[str, float] = Field(default_factory=dict)  # the organisation's (tighten only)
    banned_tickers: tuple[str, ...] = ()
    rules: dict[str, list[str]] = Field(default_factory=dict)  # rule name -> its tickers' text
    rule_tickers: dict[str, list[str]] = Field(default_factory=dict)  # rule name -> tickers
    session: dict[str, Any] = Field(default_factory=dict)  # key -> value
    summaries: list[SummaryItem] = Field(default_factory=list)
    insights: list[InsightItem] = Field(default_factory=list)
    tiers_loaded: tuple[str, ...] = ()
    tier_errors: dict[str, str] = Field(default_factory=dict)
    freshness: dict[str, Dated] = Field(default_factory=dict)

    @property
    def stale(self) -> list[str]:
        return sorted(name for name, dated in self.freshness.items() if dated.stale)


def merge_values(*tiers: Mapping[str, str]) -> dict[str, str]:
    """Later tiers override earlier ones, but only with a non-empty value."""
    out: dict[str, str] = {}
    for tier in tiers:
        for key, value in tier.items():
            if value.strip():
                out[key] = value
    return out


@functools.lru_cache(maxsize=64)
def dated(at_ms: int | None, now_ms: int) -> Dated:
    """How old ``at_ms`` is at ``now_ms`` (frozen, so shared: a decision dates ~18 items, from
    ~5 instants: the analysts' views of a day were made together)."""
    if at_ms is None:
        return Dated(at_ms=None, age_secs=None, stale=True)
    if (at_ms - now_ms) / 1000 > FUTURE_SLACK_SECS:
        # a date that cannot be true (a clock that ran ahead, a file edited by hand): the item
        # is kept, but as one of unknown age, never as the freshest there is
        return Dated(at_ms=at_ms, age_secs=None, stale=True)
    age = max(0.0, (now_ms - at_ms) / 1000)
    fields = {"at_ms": at_ms, "age_secs": round(age, 1), "stale": age > STALE_AFTER_SECS}
    if type(at_ms) is int and type(age) is float:
        # each of its type already (a float's round is a float, its comparison a bool): what
        # validation makes, without its ~1 us (the items of a decision are dated at a new
        # instant each time, so most calls make one)
        return unvalidated(Dated, fields)
    return Dated(**fields)


class ContextAssembler:
    def __init__(
        self,
        *,
        organisation: OrganisationTier | None = None,
        project: ProjectTier | None = None,
        session: SessionStore | None = None,
        analysts: AnalystDesk | None = None,
        insights: InsightSource | None = None,
        person_notes: Callable[[], str] = lambda: "",
        insights_per_ticker: int = 5,
    ) -> None:
        self.organisation = organisation
        self.project = project
        self.session = session
        self.analysts = analysts
        self.insights = insights
        self._person_notes = person_notes
        self._k = insights_per_ticker
        self._summary_views: dict[str, tuple[list[MemorySummary], list[SummaryItem]]] = {}

    async def assemble(
        self, tickers: Sequence[str], now_ms: int, regimes: Mapping[str, str] | None = None
    ) -> AssembledContext:
        loaded: list[str] = []
        errors: dict[str, str] = {}
        fresh: dict[str, Dated] = {}
        org_values: dict[str, str] = {}
        caps: dict[str, float] = {}
        banned: tuple[str, ...] = ()
        try:
            policy = self.organisation.load() if self.organisation else None
            if policy is not None:
                org_values = {"rubric": policy.rubric, "policy": policy.text}
                caps = {
                    k: v
                    for k in ("max_position_pct", "max_total_exposure_pct")
                    if (v := getattr(policy, k)) is not None
                }
                banned = policy.banned_tickers
                loaded.append("organisation")
        except TierError as exc:
            _failed("organisation", exc, errors)
        project_values: dict[str, str] = {"person_notes": self._person_notes()}
        rules: dict[str, list[str]] = {}
        rule_tickers: dict[str, list[str]] = {}
        try:
            if self.project is not None:
                project_values["notes"] = self.project.notes()
                for rule in self.project.rules():
                    applies = [t for t in tickers if rule.applies_to(t)]
                    if applies:
                        rules[rule.name] = [rule.text]
                        rule_tickers[rule.name] = applies
                loaded.append("project")
        except TierError as exc:
            _failed("project", exc, errors)
        session: dict[str, Any] = {}
        try:
            if self.session is not None:
                for ticker in tickers:
                    for entry in self.session.live(f"ticker:{normalise_name(ticker)}:"):
                        session[entry.key] = entry.value
                        fresh[f"session:{entry.key}"] = dated(entry.written_at_ms, now_ms)
                loaded.append("session")
        except (OSError, ValueError) as exc:
            _failed("session", exc, errors)
        summaries = self._summaries(tickers, now_ms, errors, fresh)
        insights = await self._insights(tickers, regimes or {}, errors, fresh, now_ms)
        fields = {
            "at_ms": now_ms,
            # the session's plain-text entries merge last (its structured ones stay in ``session``)
            "values": merge_values(
                org_values, project_values, {k: v for k, v in session.items() if isinstance(v, str)}
            ),
            "caps": caps,
            "banned_tickers": banned,
            "rules": rules,
            "rule_tickers": rule_tickers,
            "session": session,
            "summaries": summaries,
            "insights": insights,
            "tiers_loaded": tuple(loaded),
            "tier_errors": errors,
            "freshness": fresh,
        }
        return _context(fields, tickers)

    def _summaries(
        self, tickers: Sequence[str], now_ms: int, errors: dict[str, str], fresh: dict[str, Dated]
    ) -> list[SummaryItem]:
        if self.analysts is None:
            return []
        out: list[SummaryItem] = []
        try:
            for ticker in tickers:
                views = self.analysts.summaries_for(ticker, now_ms)
                out.extend(self._summary_items(ticker, views))
                for view in views:
                    if view.newest_ms is not None:
                        fresh[f"analyst:{view.analyst}:{ticker}"] = dated(view.newest_ms, now_ms)
        except Exception as exc:  # the analysts' store is a file: never fail the decision on it
            _failed("analysts", exc, errors)
        return out

    def _summary_items(self, ticker: str, views: list[MemorySummary]) -> list[SummaryItem]:
        """The items of one ticker's views. The desk hands out the same list of frozen views all
        day (a new one once rolled), so the items are built once per list, not every decision."""
        known = self._summary_views.get(ticker)
        if known is not None and known[0] is views:
            return known[1]
        items = [
            SummaryItem(
                analyst=view.analyst, ticker=ticker, kind=kind, text=text, made_at_ms=view.newest_ms
            )
            for view in views
            for kind, text in (
                ("post_close", view.summary_post_close),
                ("pre_open", view.summary_pre_open),
            )
            if text
        ]
        self._summary_views[ticker] = (views, items)  # holding the list keeps its id unique
        return items

    async def _insights(
        self,
        tickers: Sequence[str],
        regimes: Mapping[str, str],
        errors: dict[str, str],
        fresh: dict[str, Dated],
        now_ms: int,
    ) -> list[InsightItem]:
        if self.insights is None:
            return []
        out: list[InsightItem] = []
        try:
            with reading(self.insights):
                for ticker in tickers:
                    found = await self.insights.top_insights(ticker, regimes.get(ticker), self._k)
                    out.extend(found)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _failed("insights", exc, errors)
        newest = max((i.created_ms for i in out if i.created_ms is not None), default=None)
        if out:
            fresh["insights"] = dated(newest, now_ms)
        return out


_INSIGHT_TYPE = frozenset({InsightItem})
_STR_TYPE = frozenset({str})


def _context(fields: dict[str, Any], tickers: Sequence[str]) -> AssembledContext:
    """``AssembledContext(**fields)``: every field is built in ``assemble`` of its type, in
    containers of its own, but for what came from outside: the insight source's items, the
    person's notes, the tickers. When those are of their types exactly, validation (5 us a
    decision) would change nothing."""
    if (
        set(map(type, fields["insights"])) <= _INSIGHT_TYPE
        and set(map(type, fields["values"].values())) <= _STR_TYPE
        and set(map(type, tickers)) <= _STR_TYPE
    ):
        return unvalidated(AssembledContext, fields)
    return AssembledContext(**fields)


def _failed(tier: str, exc: BaseException, errors: dict[str, str]) -> None:
    log.warning("context tier %s skipped: %s", tier, exc)
    errors[tier] = f"{type(exc).__name__}: {str(exc)[:300]}"
