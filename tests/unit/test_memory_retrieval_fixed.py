"""``Retriever.rows`` takes each candidate's fixed values (id, created_ms, ttl_days, kind and the
salience term) from a memo by the very insight object: its rows are those of the plain formula,
bit for bit, across calls that hand back the same objects, twins (equal values, other objects),
role weights changed in place and a config of another salience weight."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from contract.memory_contract import DAY_MS, make_insight
from core.rounding import scaled_round
from memory.config import RetrievalConfig
from memory.model import Insight
from memory.port import CandidateQuery
from memory.retrieval import Retriever, Row

NOW = 1_750_000_000_000


class _Candidates:
    """A store that hands out the candidates it is given (the retriever asks for nothing else)."""

    def __init__(self) -> None:
        self.found: list[tuple[Insight, float]] = []

    async def candidates(self, query: CandidateQuery) -> list[tuple[Insight, float]]:
        return list(self.found)


def _plain_rows(
    found: list[tuple[Insight, float]], config: RetrievalConfig, now_ms: int, k: int
) -> list[Row]:
    """The scoring loop as written before the memo: every value read from the insight (one
    written after ``now_ms`` is not there yet)."""
    kept: list[Row] = []
    for insight, sim in found:
        if insight.created_ms > now_ms:
            continue
        age_days = max(0.0, (now_ms - insight.created_ms) / DAY_MS)
        if insight.ttl_days is not None and age_days > insight.ttl_days:
            continue
        weight = config.role_weights.get(insight.kind, 1.0)
        score = (
            sim * weight
            - config.recency_lambda * age_days
            + config.salience_weight * insight.salience
        )
        if score < config.score_cutoff:
            continue
        rounded = scaled_round(score, 4, 1e4)
        row = (-rounded, -insight.created_ms, insight.insight_id, len(kept), insight)
        kept.append((*row, sim, weight, age_days))
    kept.sort()
    return kept[:k]


def _bits(rows: list[Row]) -> list[tuple[Any, ...]]:
    """Rows with their floats as bit patterns (0.0 and -0.0 apart) and the insight by identity."""
    return [
        tuple(v.hex() if type(v) is float else id(v) if isinstance(v, Insight) else v for v in r)
        for r in rows
    ]


_INSIGHT = st.builds(
    lambda n, age, kind, salience, ttl: make_insight(
        f"lesson number {n} about entries",
        created_ms=NOW - int(age * DAY_MS),
        kind=kind,
        salience=salience,
    ).model_copy(update={"ttl_days": ttl}),
    st.integers(0, 5),
    st.floats(-2.0, 200.0),
    st.sampled_from(["reflection", "rollup", "person", "debate"]),
    st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    st.sampled_from([None, 1.0, 30.0]),
)
_WEIGHT = st.sampled_from([0.0, -0.0, 0.5, 1, 1.0, 1.5, 3.0])


@settings(max_examples=examples(150), deadline=None)
@given(
    pool=st.lists(_INSIGHT, min_size=1, max_size=8),
    steps=st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 7), st.sampled_from([-1.0, -0.0, 0.0, 0.3, 1.0]))),
            st.sampled_from(["same", "twin", "weight", "salience"]),
            _WEIGHT,
            st.integers(0, 3 * DAY_MS),
            st.integers(1, 5),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_rows_are_the_plain_formula(
    pool: list[Insight], steps: list[tuple[list[tuple[int, float]], str, Any, int, int]]
) -> None:
    store = _Candidates()
    weights = {"person": 1.5, "rollup": 1.2, "reflection": 1.0}
    config = RetrievalConfig(role_weights=weights, score_cutoff=-1.0)
    retriever = Retriever(store, config)  # type: ignore[arg-type]
    for picks, change, weight, later, k in steps:
        if change == "twin":  # equal values, another object: the memo must not mix them up
            pool = [i.model_copy() for i in pool]
        elif change == "weight":  # the config's dict is mutable: a weight changed in place
            weights["reflection"] = weight
        elif change == "salience":
            config = RetrievalConfig(role_weights=weights, salience_weight=0.1, score_cutoff=-1.0)
            retriever.config = config
        store.found = [(pool[n % len(pool)], sim) for n, sim in picks]
        got = asyncio.run(retriever.rows(now_ms=NOW + later, ticker=None, k=k))
        assert _bits(got) == _bits(_plain_rows(store.found, config, NOW + later, k))
