"""Every operator against a plain reference, threshold edges included; crossings over sequences;
missing values; baselines kept across agent updates."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gate.compiled import HELD, QUIET, UNAVAILABLE, CompiledConditions
from gate.conditions import ABS_OPERATORS, CROSSING_OPERATORS, Operator, WakeCondition

LEVEL_OPERATORS = [op for op in Operator if op not in CROSSING_OPERATORS]


def _reference_level(op: Operator, value: float, threshold: float) -> bool:
    return {
        Operator.LT: value < threshold,
        Operator.LTE: value <= threshold,
        Operator.GT: value > threshold,
        Operator.GTE: value >= threshold,
        Operator.ABS_GT: abs(value) > threshold,
        Operator.ABS_LT: abs(value) < threshold,
    }[op]


def _reference_crossings(op: Operator, values: list[float], threshold: float) -> list[bool]:
    """Whether each observation (all committed) is a cross; the first never is."""
    out = [False] if values else []
    for previous, current in itertools.pairwise(values):
        if op is Operator.CROSSES_ABOVE:
            out.append(previous <= threshold < current)
        else:
            out.append(previous >= threshold > current)
    return out


def _compiled(op: Operator, threshold: float, metric: str = "btc_price") -> CompiledConditions:
    return CompiledConditions([WakeCondition(metric=metric, operator=op, threshold=threshold)])


def _holds(conditions: CompiledConditions, value: float | None, commit: bool = True) -> bool:
    outcome = conditions.check({"btc_price": value}.get, commit)
    return outcome == HELD


@pytest.mark.parametrize(
    ("op", "below", "at", "above"),
    [
        (Operator.LT, True, False, False),
        (Operator.LTE, True, True, False),
        (Operator.GT, False, False, True),
        (Operator.GTE, False, True, True),
    ],
)
def test_comparisons_below_at_and_above_the_threshold(
    op: Operator, below: bool, at: bool, above: bool
) -> None:
    conditions = _compiled(op, 100.0)
    assert [_holds(conditions, v) for v in (99.99, 100.0, 100.01)] == [below, at, above]


def test_absolute_operators_at_both_signs() -> None:
    abs_gt, abs_lt = _compiled(Operator.ABS_GT, 2.0), _compiled(Operator.ABS_LT, 2.0)
    values = (-2.5, -2.0, -1.0, 0.0, 1.0, 2.0, 2.5)
    assert [_holds(abs_gt, v) for v in values] == [True, False, False, False, False, False, True]
    assert [_holds(abs_lt, v) for v in values] == [False, False, True, True, True, False, False]


_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(st.sampled_from(LEVEL_OPERATORS), _finite, _finite)
def test_level_operators_match_the_reference(op: Operator, value: float, threshold: float) -> None:
    assume(op not in ABS_OPERATORS or threshold >= 0)
    assert _holds(_compiled(op, threshold), value) == _reference_level(op, value, threshold)


@given(st.sampled_from(LEVEL_OPERATORS), _finite)
def test_value_exactly_at_the_threshold(op: Operator, threshold: float) -> None:
    threshold = abs(threshold) if op in ABS_OPERATORS else threshold
    expected = op in {Operator.LTE, Operator.GTE}  # only the inclusive ones hold on the line
    assert _holds(_compiled(op, threshold), threshold) is expected
    if op in ABS_OPERATORS:
        assert _holds(_compiled(op, threshold), -threshold) is False


@given(
    st.sampled_from(sorted(CROSSING_OPERATORS)),
    st.lists(st.sampled_from([98.0, 99.0, 100.0, 101.0, 102.0]) | _finite, max_size=30),
    st.sampled_from([100.0]) | _finite,
)
def test_crossings_match_the_reference_over_sequences(
    op: Operator, values: list[float], threshold: float
) -> None:
    conditions = _compiled(op, threshold)
    assert [_holds(conditions, v) for v in values] == _reference_crossings(op, values, threshold)


@given(st.sampled_from(sorted(CROSSING_OPERATORS)), _finite)
def test_crossing_exactly_at_the_threshold_counts_once(op: Operator, threshold: float) -> None:
    step = max(abs(threshold) * 1e-9, 1e-9)
    before, after = (
        (threshold - step, threshold + step)
        if op is Operator.CROSSES_ABOVE
        else (threshold + step, threshold - step)
    )
    assume(before != threshold != after)
    conditions = _compiled(op, threshold)
    # from one side onto the line: not yet a cross; off the line to the other side: the cross
    assert [_holds(conditions, v) for v in (before, threshold, after, after)] == [
        False,
        False,
        True,
        False,
    ]
    # starting on the line counts as "the other side"
    on_line = _compiled(op, threshold)
    assert [_holds(on_line, v) for v in (threshold, after)] == [False, True]


def test_the_first_observation_is_never_a_cross() -> None:
    conditions = _compiled(Operator.CROSSES_ABOVE, 100.0)
    assert [_holds(conditions, v) for v in (150.0, 160.0, 90.0, 110.0)] == [
        False,
        False,
        False,
        True,
    ]


def test_without_commit_the_baseline_stays_so_a_net_cross_is_seen_later() -> None:
    conditions = _compiled(Operator.CROSSES_ABOVE, 100.0)
    assert not _holds(conditions, 99.0, commit=False)  # no baseline yet: taken anyway
    assert _holds(conditions, 101.0, commit=False)  # crossed since the baseline
    assert _holds(conditions, 102.0, commit=False)  # still across the uncommitted baseline
    assert not _holds(conditions, 99.5, commit=False)  # back below: no net cross
    assert _holds(conditions, 103.0, commit=True)
    assert not _holds(conditions, 104.0, commit=True)  # committed: the cross is spent


@pytest.mark.parametrize("op", list(Operator))
@pytest.mark.parametrize("value", [None, math.nan])
def test_a_missing_value_never_holds_and_is_counted(op: Operator, value: float | None) -> None:
    conditions = _compiled(op, 0.0)
    assert conditions.check({"btc_price": value}.get, True) == UNAVAILABLE
    nothing: dict[str, float] = {}
    assert conditions.check(nothing.get, True) == UNAVAILABLE
    assert conditions.all[0].unavailable == 2


def test_a_gap_keeps_the_crossing_baseline() -> None:
    conditions = _compiled(Operator.CROSSES_BELOW, 100.0)
    assert [_holds(conditions, v) for v in (101.0, None, math.nan, 99.0)] == [
        False,
        False,
        False,
        True,
    ]


def test_outcome_is_held_when_any_holds_else_unavailable_before_quiet() -> None:
    conditions = CompiledConditions(
        [
            WakeCondition(metric="btc_price", operator=Operator.GT, threshold=1e9),
            WakeCondition(metric="fear_greed", operator=Operator.LT, threshold=20),
        ]
    )
    assert conditions.check({"btc_price": 5.0}.get, True) == UNAVAILABLE
    assert conditions.check({"btc_price": 5.0, "fear_greed": 50.0}.get, True) == QUIET
    values = {"btc_price": 5.0, "fear_greed": 10.0}
    assert conditions.check(values.get, True) == HELD
    assert conditions.held_reasons(values.get) == ["wake:fear_greed lt 20"]


def test_an_update_keeps_the_baseline_of_a_crossing_condition_set_again() -> None:
    same = WakeCondition(metric="btc_price", operator=Operator.CROSSES_ABOVE, threshold=100.0)
    other = WakeCondition(metric="btc_price", operator=Operator.CROSSES_ABOVE, threshold=105.0)
    old = CompiledConditions([same, other])
    old.check({"btc_price": 99.0}.get, True)
    new = CompiledConditions([same.model_copy(update={"reason": "new words"}), other], old)
    assert [c.previous for c in new.all] == [99.0, 99.0]
    fresh = CompiledConditions([same.model_copy(update={"threshold": 101.0})], old)
    assert fresh.all[0].previous is None
    assert _holds(new, 101.0)
    assert not _holds(fresh, 102.0)  # a new condition: its first observation is the baseline
