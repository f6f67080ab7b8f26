"""The decision path's shortcuts in the memory reads answer bit for bit what the plain code does.

- ``scaled_round`` (the ranking's rounding) against ``round``: wide floats, exact and near halves,
  signed zeros, the odd infinity and NaN.
- ``Situation.from_features`` (one pass, the clamp as comparisons, made without validation when
  every value is a float) against the plain definition, validated: missing, NaN, infinite, huge,
  integer and signed-zero features, known and unknown regimes.
- ``unit`` (the norm's own steps) against ``v / np.linalg.norm(v)`` at float32.
- ``_top_small`` (trade neighbours in Python) against ``top_positions``: whenever it answers, the
  same positions; it must step aside for a NaN and for a tie across the n-th place.
- An index block's gathered rows, remembered by where the TTL cut falls, against a fresh gather:
  every cut of a block (each created_ms an edge), each limit, twice (remembered), then again after
  an append (forgotten).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from model_support import assert_made_as_validated
from property_budget import examples

from core.rounding import scaled_round
from memory.config import InsightKind
from memory.model import REGIME_LABELS, SITUATION_FEATURES, VECTOR_DIM, Situation
from memory.port import CandidateQuery
from memory.sqlite_index import SMALL_BLOCK, InsightIndex, _top_small, top_positions, unit

T0 = 1_740_000_000_000


def _same(a: float, b: float) -> bool:
    """The same float: the sign of a zero counts, NaN equals NaN."""
    return (
        a.hex() == b.hex()
        if not (math.isnan(a) or math.isnan(b))
        else math.isnan(a) == math.isnan(b)
    )


@st.composite
def near_halves(draw: st.DrawFn) -> tuple[float, int]:
    """x within a few ulps of a rounding half (or of a whole) at ``digits``: where a shortcut
    would slip if anywhere."""
    digits = draw(st.integers(0, 8))  # 8: the snapshot walks' decimals
    whole = draw(st.integers(-(10**8), 10**8))
    x = (whole + draw(st.sampled_from([0.5, 0.0, 0.4999, 0.5001]))) / 10.0**digits
    for _ in range(draw(st.integers(0, 3))):
        x = math.nextafter(x, draw(st.sampled_from([math.inf, -math.inf])))
    return x, digits


@settings(max_examples=examples(3000), deadline=None)
@given(
    case=st.one_of(
        near_halves(),
        st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 8)),
        st.tuples(st.floats(-12.0, 12.0), st.sampled_from([2, 4])),  # scores, sims
        st.tuples(st.floats(-1e-3, 1e-3), st.sampled_from([2, 4])),  # signed zeros come out
    )
)
def test_scaled_round_is_round(case: tuple[float, int]) -> None:
    x, digits = case
    assert _same(scaled_round(x, digits, 10.0**digits), round(x, digits))


def test_scaled_round_on_the_known_edges() -> None:
    for x in (0.0, -0.0, -0.00001, 0.00005, -0.00005, 0.00015, 2.675, 1e300, -1e-300, 2.0**31):
        for digits in (2, 4):
            assert _same(scaled_round(x, digits, 10.0**digits), round(x, digits)), (x, digits)


finite32 = st.floats(-1e6, 1e6, width=32)


@settings(max_examples=examples(300), deadline=None)
@given(
    values=st.lists(
        st.one_of(finite32, st.sampled_from([0.0, -0.0, 1e-30, 3e38])),
        min_size=VECTOR_DIM,
        max_size=VECTOR_DIM,
    ),
    strided=st.booleans(),
)
def test_unit_is_the_vector_over_its_numpy_norm(values: list[float], strided: bool) -> None:
    array = np.asarray(values, dtype=np.float32)
    if strided:  # a view with a step, as a column of a matrix would be
        array = np.repeat(array, 2)[::2]
    with np.errstate(over="ignore", invalid="ignore"):
        norm = float(np.linalg.norm(array))
        expected = array / norm if norm > 0 else array
        got = unit(array)
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


few = st.sampled_from([-1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0])  # ties everywhere


@settings(max_examples=examples(1500), deadline=None)
@given(
    values=st.lists(st.one_of(few, st.floats(-1.0, 1.0, width=32)), max_size=SMALL_BLOCK),
    n=st.integers(-1, SMALL_BLOCK + 2),
    nan_at=st.one_of(st.none(), st.integers(0, SMALL_BLOCK)),
)
def test_top_small_answers_as_top_positions_or_steps_aside(
    values: list[float], n: int, nan_at: int | None
) -> None:
    """(``np.argpartition`` picks among values tied across the cut its own way, not always the
    lower positions, once there are more than a few dozen values.)"""
    if nan_at is not None:
        values.insert(nan_at, math.nan)
    got = _top_small(values, n)
    array = np.asarray(values, dtype=np.float32)
    if got is None:
        ordered = sorted(values, reverse=True)
        tie_at_cut = 0 < n < len(values) and ordered[n - 1] == ordered[n]
        assert any(math.isnan(v) for v in values) or tie_at_cut or n <= 0
        return
    assert got == top_positions(array.astype(np.float64), n).tolist()
    assert got == top_positions(np.asarray(values), n).tolist()


def _block_index(seed: int, n: int) -> tuple[InsightIndex, list[int]]:
    rng = np.random.default_rng(seed)
    index = InsightIndex()
    stamps = sorted(T0 + int(rng.integers(0, 50)) * 60_000 for _ in range(n))
    for i, created in enumerate(stamps):
        index.append_row(
            f"i-{i:03d}",
            "SOL/USDT",
            ("low_volatility", "medium_volatility", None)[int(rng.integers(0, 3))],
            ("reflection", "person", "rollup", "debate")[int(rng.integers(0, 4))],
            created,
            rng.integers(-2, 3, VECTOR_DIM).astype(np.float32),
        )
    return index, stamps


def _fresh_gather_top(index: InsightIndex, query: CandidateQuery) -> list[tuple[str, float]]:
    """``index.top`` with every remembered gather forgotten first."""
    for block in index.blocks.values():
        for fixed in block._filters.values():
            fixed.gathered.clear()
    return index.top(query)


@settings(max_examples=examples(40), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 60),
    regime=st.sampled_from(["low_volatility", "medium_volatility", None]),
    kinds=st.sampled_from([(), ("reflection", "rollup", "person"), ("debate",)]),
    limit=st.integers(1, 20),
)
def test_remembered_gathers_answer_as_fresh_ones_at_every_ttl_cut(
    seed: int, n: int, regime: str | None, kinds: tuple[InsightKind, ...], limit: int
) -> None:
    index, stamps = _block_index(seed, n)
    vector = tuple(float(v) for v in np.random.default_rng(seed + 1).integers(-2, 3, VECTOR_DIM))
    cuts = sorted({*stamps, stamps[0] - 1, stamps[-1] + 1} | {s + 1 for s in stamps})
    for _ in range(2):  # the second pass reads every gather from memory
        for oldest in cuts:
            query = CandidateQuery(
                ticker="SOL/USDT", regime=regime, kinds=kinds, vector=vector,
                min_created_ms=oldest, limit=limit,
            )  # fmt: skip
            remembered = index.top(query)
            fresh = _fresh_gather_top(index, query)
            assert [(i, s.hex()) for i, s in remembered] == [(i, s.hex()) for i, s in fresh]
            index.top(query)  # fill the memo again for the next pass
    index.append_row("i-late", "SOL/USDT", regime, "reflection", stamps[-1], None)
    block = index.blocks["SOL/USDT"]
    block.arrays()
    assert all(not f.gathered for f in block._filters.values())  # an append forgets them


def _reference_situation(features: dict[str, float | None], regime: str) -> Situation:
    values: list[float] = []
    for name, centre, scale in SITUATION_FEATURES:
        raw = features.get(name)
        z = 0.0 if raw is None or not math.isfinite(raw) else (raw - centre) / scale
        values.append(max(-5.0, min(5.0, z)))
    values.extend(1.0 if regime == label else 0.0 for label in REGIME_LABELS)
    known = {name: features.get(name) for name, _c, _s in SITUATION_FEATURES}
    return Situation(features=known, regime=regime, vector=tuple(values))


_feature_values = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-200.0, 200.0),
    st.integers(-100, 100),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, 60.0, 40.0, 50.0, 10.0, 90.0, 0.1, -0.1]),
)


@settings(max_examples=examples(2000), deadline=None)
@given(
    features=st.dictionaries(
        st.sampled_from([name for name, _c, _s in SITUATION_FEATURES] + ["other"]),
        _feature_values,
    ),
    regime=st.sampled_from([*REGIME_LABELS, "unknown", ""]),
)
def test_situation_from_features_is_the_plain_definition(
    features: dict[str, float | None], regime: str
) -> None:
    got, want = Situation.from_features(features, regime), _reference_situation(features, regime)
    assert got == want
    # made without validation when every value is a float already: as validation makes it
    assert_made_as_validated(got, want, Situation)
    assert [type(v) for v in got.features.values()] == [type(v) for v in want.features.values()]
    assert [v.hex() for v in got.vector] == [v.hex() for v in want.vector]  # zeros' signs too
    assert list(got.features) == list(want.features)
