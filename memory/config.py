"""MemoryConfig: every knob of the trading memory, with defaults and the ranges that make sense.

Env: ``VIGIL_MEMORY__FIELD`` (e.g. ``VIGIL_MEMORY__NEO4J_URI=bolt://neo4j:7687``). The Neo4j
password also comes from ``NEO4J_PASSWORD`` or a secret file (see runner/config.py's secrets dir).
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

#: ``debate``: a debate role's output (agent/debate_store.py): an opinion, ranked below lessons
InsightKind = Literal["reflection", "rollup", "person", "debate"]


class RetrievalConfig(BaseModel):
    """FinMem scoring: ``score = sim * role_weight[kind] - recency_lambda * age_days
    + salience_weight * salience``; candidates ``k * 3``, then ttl / cutoff filters, top ``k``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: per insight kind; 0..3. A person's insight outranks the daemon's own reflections, and a
    #: lesson (reflection) outranks a debate role's opinion.
    role_weights: dict[str, Annotated[float, Field(ge=0.0, le=3.0)]] = Field(
        default_factory=lambda: {"person": 1.5, "rollup": 1.2, "reflection": 1.0, "debate": 0.6}
    )
    #: score lost per day of age; 0..0.1 (0.01: a 30-day-old lesson loses 0.3)
    recency_lambda: float = Field(0.01, ge=0.0, le=0.1)
    #: weight of the stored salience (0..1); 0..1
    salience_weight: float = Field(0.3, ge=0.0, le=1.0)
    #: items older than this are never returned (an insight's own ttl_days wins if shorter); 1..3650
    ttl_days: float = Field(180.0, ge=1.0, le=3650.0)
    #: items scoring below this are dropped; -1..2
    score_cutoff: float = Field(0.1, ge=-1.0, le=2.0)
    #: items returned; 1..20
    k: int = Field(5, ge=1, le=20)

    @field_validator("role_weights")
    @classmethod
    def _known_kinds(cls, value: dict[str, float]) -> dict[str, float]:
        # a misspelt kind (``persn``) was taken and weighed nothing: the meant one kept its own
        unknown = sorted(set(value) - set(get_args(InsightKind)))
        if unknown:
            raise ValueError(f"no insight kind {unknown}; the kinds: {list(get_args(InsightKind))}")
        return value


class WriteConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    #: texts shorter than this are not written; 5..100
    min_text_chars: int = Field(20, ge=5, le=100)
    max_text_chars: int = Field(300, ge=50, le=300)
    #: a text this similar (cosine of text embeddings) to one of the last ``dedupe_last_n`` of the
    #: same ticker and kind is a duplicate; 0.8..1
    dedupe_cosine: float = Field(0.97, ge=0.8, le=1.0)
    dedupe_last_n: int = Field(20, ge=1, le=200)
    #: insights kept per ticker + regime before the oldest are rolled up; 10..500
    max_per_ticker_regime: int = Field(50, ge=10, le=500)
    #: insights of one regime summarised into one rollup; 2..50
    rollup_count: int = Field(10, ge=2, le=50)


class FallbackRuleConfig(BaseModel):
    """The rule-based decider's memory rule (agent/fallback_memory.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    #: Beta prior of the win rate (a=b: 50 %, worth a+b pseudo-trades)
    prior_wins: float = Field(2.0, gt=0.0, le=50.0)
    prior_losses: float = Field(2.0, gt=0.0, le=50.0)
    #: entry scale bounds; the scale is 2 * posterior mean, clamped
    min_scale: float = Field(0.5, ge=0.0, le=1.0)
    max_scale: float = Field(1.5, ge=1.0, le=2.0)
    #: trades of this ticker+regime in the situation neighbourhood that the rule reads
    neighbours: int = Field(20, ge=1, le=500)


class MemoryConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    #: false: nothing reads or writes the memory (as ``replay --no-memory``)
    enabled: bool = True
    #: false: the memory is read but nothing is written back (a dry run)
    write_back: bool = True
    db_filename: str = "memory.db"
    #: the write-back outbox (``state.outbox`` JSON lines) in the state dir
    outbox_filename: str = "outbox/memory.jsonl"
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr | None = None
    neo4j_database: str | None = None
    embeddings: Literal["local", "openai"] = "local"
    embeddings_url: str = "http://127.0.0.1:11434"  # an OpenAI-compatible server (Ollama)
    embeddings_model: str = "nomic-embed-text"
    #: characters of historical_insights in the snapshot (insights + regime statistics); 200..8000
    snapshot_budget_chars: int = Field(1500, ge=200, le=8000)
    #: reflections written by Claude per UTC day at most (each is one short call)
    model_reflections_per_day: int = Field(20, ge=0, le=500)
    retrieval: RetrievalConfig = RetrievalConfig()
    write: WriteConfig = WriteConfig()
    fallback_rule: FallbackRuleConfig = FallbackRuleConfig()
