"""update_from_agent: the timer clamped or refused with a reason, conditions replaced, rejections
logged; GateConfig's own checks."""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from test_gate_support import T0_MS, rig

from gate.conditions import Operator, WakeCondition
from gate.gate import GateConfig


@pytest.mark.parametrize(
    ("requested", "applied", "adjustment"),
    [
        (0, 60.0, "clamped from 0 to the minimum 60 s"),
        (-5, 60.0, "clamped from -5 to the minimum 60 s"),
        (10**9, 3600.0, "clamped from 1e+09 to the maximum 3600 s"),
        (10**400, 3600.0, "clamped from inf to the maximum 3600 s"),
        (math.inf, 3600.0, "clamped from inf to the maximum 3600 s"),
        (-math.inf, 60.0, "clamped from -inf to the minimum 60 s"),
        (math.nan, 900.0, "not a number (nan): default 900 s"),
        ("300", 900.0, "not a number: default 900 s"),
        (True, 900.0, "not a number: default 900 s"),
        (None, 900.0, "not given: default 900 s"),
        (60, 60.0, ""),
        (3600.0, 3600.0, ""),
        (450.5, 450.5, ""),
    ],
)
def test_next_check_is_clamped_or_replaced_with_a_reason(
    requested: object, applied: float, adjustment: str
) -> None:
    r = rig()
    update = r.gate.update_from_agent(requested, [])
    assert update.next_check_secs == applied
    assert update.next_check_adjustment == adjustment
    assert update.adjusted is bool(adjustment)
    assert update.next_check_at_ms == T0_MS + round(applied * 1000) == r.gate.next_check_at_ms
    assert r.gate.stats().next_check_adjusted == int(bool(adjustment))


def test_a_nan_or_non_numeric_timer_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    r = rig()
    with caplog.at_level(logging.WARNING, logger="gate.gate"):
        r.gate.update_from_agent(math.nan, [])
        r.gate.update_from_agent("soon", [])
    messages = [rec.getMessage() for rec in caplog.records]
    assert messages == [
        "next_check_seconds is NaN: default 900 s used",
        "next_check_seconds 'soon' is not a number: default 900 s used",
    ]


@given(st.floats(allow_nan=False) | st.integers(min_value=-(10**12), max_value=10**12))
def test_any_number_lands_in_the_configured_range(requested: float) -> None:
    r = rig(min_next_check_secs=60, max_next_check_secs=3600)
    update = r.gate.update_from_agent(requested, None)
    assert 60 <= update.next_check_secs <= 3600
    if 60 <= requested <= 3600:
        assert update.next_check_secs == requested and not update.adjusted
    else:
        assert update.next_check_secs == (60 if requested < 60 else 3600) and update.adjusted


def test_the_new_timer_runs_from_the_update() -> None:
    r = rig()
    r.advance(1000)
    r.gate.update_from_agent(120, [])
    assert r.gate.next_check_at_ms == T0_MS + 1_120_000
    r.advance(119.5)
    assert not r.tick().passed
    r.advance(0.5)
    assert r.tick().reasons == ("agent_timer",)


def test_unknown_metric_and_operator_are_rejected_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = rig()
    raw = [
        {"metric": "btc_price", "operator": "lt", "threshold": 90_000, "reason": "dip"},
        {"metric": "btc_open_interest", "operator": "gt", "threshold": 1, "reason": "r"},
        {"metric": "eth_price", "operator": "equals", "threshold": 3000},
    ]
    with caplog.at_level(logging.WARNING, logger="gate.gate"):
        update = r.gate.update_from_agent(600, raw)
    assert [c.metric for c in update.accepted] == ["btc_price"]
    assert [(x.index, x.reason) for x in update.rejected] == [
        (1, "unknown metric 'btc_open_interest' (did you mean open_interest_change_pct?)"),
        (2, "unknown operator 'equals' (known: " + ", ".join(op.value for op in Operator) + ")"),
    ]
    logged = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]
    assert len(logged) == 2
    assert logged[0].startswith("wake condition #1 rejected: unknown metric 'btc_open_interest'")
    assert "'metric': 'btc_open_interest'" in logged[0]
    assert logged[1].startswith("wake condition #2 rejected: unknown operator 'equals'")
    assert r.gate.wake_conditions == update.accepted
    stats = r.gate.stats()
    assert (stats.agent_updates, stats.conditions_accepted, stats.conditions_rejected) == (1, 1, 2)


def test_each_update_replaces_the_conditions_and_none_clears_them() -> None:
    r = rig()
    r.gate.update_from_agent(600, [{"metric": "btc_price", "operator": "lt", "threshold": 1}])
    second = WakeCondition(metric="fear_greed", operator=Operator.LT, threshold=25)
    r.gate.update_from_agent(600, [second])  # the fallback may hand over models
    assert list(r.gate.wake_conditions) == [second]
    r.gate.update_from_agent(600, None)
    assert r.gate.wake_conditions == ()
    r.metrics["fear_greed"] = 10.0
    assert not r.tick().passed


def test_a_crossing_set_again_keeps_watching_across_the_update() -> None:
    r = rig(cooldown_secs=0)
    cross = {"metric": "btc_price", "operator": "crosses_below", "threshold": 90_000}
    r.gate.update_from_agent(3600, [cross])
    r.metrics["btc_price"] = 91_000.0
    assert not r.tick().passed  # baseline
    r.gate.update_from_agent(3600, [cross | {"reason": "still watching"}])
    r.metrics["btc_price"] = 89_000.0
    assert r.tick().reasons == ("wake:btc_price crosses_below 90000 (still watching)",)


def test_the_condition_cap_follows_the_config() -> None:
    r = rig(max_wake_conditions=2)
    raw = [{"metric": "btc_price", "operator": "gt", "threshold": float(i)} for i in range(3)]
    update = r.gate.update_from_agent(600, raw)
    assert len(update.accepted) == 2
    assert update.rejected[0].reason == "over the limit of 2 wake conditions"


def test_config_refuses_an_unordered_timer_range_and_bad_values() -> None:
    with pytest.raises(ValidationError, match="min_next_check_secs <= default_next_check_secs"):
        GateConfig(min_next_check_secs=600, default_next_check_secs=300)
    with pytest.raises(ValidationError):
        GateConfig(anomaly_zscore=0)
    with pytest.raises(ValidationError):
        GateConfig(cooldown_secs=math.nan)
    with pytest.raises(ValidationError):
        GateConfig(surprise=1)  # type: ignore[call-arg]
    assert GateConfig() == GateConfig(
        anomaly_zscore=2.0,
        cooldown_secs=120,
        min_next_check_secs=60,
        max_next_check_secs=3600,
        default_next_check_secs=900,
        max_wake_conditions=10,
    )
