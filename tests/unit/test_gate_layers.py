"""AdaptiveGate.evaluate: each layer, the cooldown and its exact boundary, the timer's once-per-
setting firing and re-arm, reasons and per-layer counts. Time is a VirtualClock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_gate_support import T0_MS, make_features, make_tick, rig

from gate.gate import COOLING_DOWN, QUIET, GateStats, Layer, LayerStats


def _cond(metric: str, operator: str, threshold: float, reason: str = "") -> dict[str, object]:
    return {"metric": metric, "operator": operator, "threshold": threshold, "reason": reason}


def _layers_add_up(stats: GateStats) -> None:
    for layer in (stats.candle_close, stats.agent_timer, stats.anomaly, stats.wake_condition):
        assert layer.passed + layer.cooldown + layer.quiet + layer.unavailable == stats.evaluations


def test_a_quiet_tick_is_denied_with_the_shared_verdict() -> None:
    r = rig()
    assert r.tick(zscore=0.5) is QUIET
    assert QUIET.passed is False and QUIET.layer is None and QUIET.reasons == ()


@pytest.mark.parametrize("timeframe", ["15m", "1h", "4h"])
def test_a_candle_close_always_passes(timeframe: str) -> None:
    r = rig()
    verdict = r.tick("ETH/USDT", closed=True, timeframe=timeframe)  # type: ignore[arg-type]
    assert verdict.passed and verdict.layer is Layer.CANDLE_CLOSE
    assert verdict.reasons == (f"candle_close:ETH/USDT:{timeframe}",)
    again = r.tick("BTC/USDT", closed=True, timeframe="1h")  # in the cooldown it just started
    assert again.passed and again.reasons == ("candle_close:BTC/USDT:1h",)
    assert r.gate.stats().candle_close == LayerStats(passed=2, quiet=0)


def test_the_anomaly_layer_at_and_around_the_limit() -> None:
    assert rig().tick("SOL/USDT", zscore=1.999).passed is False
    verdict = rig().tick("SOL/USDT", zscore=-2.31)
    assert verdict.passed and verdict.layer is Layer.ANOMALY
    assert verdict.reasons == ("anomaly:SOL/USDT:z=-2.31",)
    assert rig().tick(zscore=2.0).reasons == ("anomaly:BTC/USDT:z=2.00",)  # >= passes
    assert rig().tick(zscore=-2.0).passed
    assert not rig(anomaly_zscore=3.0).tick(zscore=2.9).passed  # configurable


def test_no_zscore_means_the_anomaly_layer_is_unavailable() -> None:
    r = rig()
    r.tick(zscore=None)
    assert r.gate.evaluate(make_tick(), None, {}) is QUIET
    assert r.gate.stats().anomaly == LayerStats(unavailable=2)


def test_the_agent_timer_fires_when_due_then_re_arms_at_the_default() -> None:
    r = rig(default_next_check_secs=900)
    assert r.gate.next_check_at_ms == T0_MS + 900_000  # armed from the start: never silent
    r.gate.update_from_agent(300, [])
    assert r.gate.next_check_at_ms == T0_MS + 300_000
    r.advance(299.5)
    assert r.tick() is QUIET
    r.advance(0.5)  # exactly due
    verdict = r.tick()
    assert verdict.passed and verdict.layer is Layer.AGENT_TIMER
    assert verdict.reasons == ("agent_timer",)
    assert r.gate.next_check_at_ms == T0_MS + 300_000 + 900_000  # re-armed, once per setting
    r.advance(900)
    assert r.tick().reasons == ("agent_timer",)  # the default keeps the daemon awake
    assert r.gate.stats().agent_timer == LayerStats(passed=2, quiet=1)


def test_a_close_consumes_a_due_timer_and_names_it() -> None:
    r = rig(default_next_check_secs=600)
    r.gate.update_from_agent(60, [])
    r.advance(60)
    verdict = r.tick(closed=True, zscore=2.5)
    assert verdict.layer is Layer.CANDLE_CLOSE
    assert verdict.reasons == (
        "candle_close:BTC/USDT:15m",
        "agent_timer",
        "anomaly:BTC/USDT:z=2.50",
    )
    assert r.gate.next_check_at_ms == T0_MS + 60_000 + 600_000


def test_a_wake_condition_passes_with_its_reason() -> None:
    r = rig()
    r.gate.update_from_agent(3600, [_cond("btc_price", "lt", 90_000, "reason text")])
    r.metrics["btc_price"] = 90_000.0
    assert r.tick() is QUIET
    r.metrics["btc_price"] = 89_999.5
    verdict = r.tick("ETH/USDT")  # any ticker's tick checks every condition
    assert verdict.passed and verdict.layer is Layer.WAKE_CONDITION
    assert verdict.reasons == ("wake:btc_price lt 90000 (reason text)",)
    assert r.gate.last_wake_reasons == verdict.reasons


def test_a_condition_over_an_unavailable_metric_does_not_hold_and_is_counted() -> None:
    r = rig()
    r.gate.update_from_agent(
        3600, [_cond("fear_greed", "lt", 20), _cond("btc_funding_rate", "gt", 0.001)]
    )
    assert r.tick() is QUIET
    assert r.tick() is QUIET
    r.metrics["fear_greed"] = 50.0
    assert r.tick() is QUIET
    stats = r.gate.stats()
    assert stats.wake_condition == LayerStats(unavailable=3)
    assert stats.unavailable_metrics == {"fear_greed": 2, "btc_funding_rate": 3}
    r.gate.update_from_agent(3600, [])  # counts survive the conditions being replaced
    assert r.gate.stats().unavailable_metrics == {"fear_greed": 2, "btc_funding_rate": 3}


def test_the_cooldown_denies_everything_but_closes_until_exactly_its_end() -> None:
    r = rig(cooldown_secs=120)
    cooling = [r.gate.in_cooldown]
    assert r.tick(zscore=3.0).passed
    cooling.append(r.gate.in_cooldown)
    r.advance(119.75)
    assert r.tick(zscore=3.0) is COOLING_DOWN
    assert r.tick(closed=True).passed  # a close passes and restarts the cooldown
    r.advance(119.75)
    assert r.tick(zscore=3.0) is COOLING_DOWN
    r.advance(0.25)  # exactly 120 s after the last pass
    cooling.append(r.gate.in_cooldown)
    assert cooling == [False, True, False]
    assert r.tick(zscore=3.0).passed
    stats = r.gate.stats()
    assert stats.anomaly.passed == 2 and stats.anomaly.cooldown == 2
    assert stats.passes == 3 and stats.evaluations == 5
    _layers_add_up(stats)


@given(
    cooldown=st.floats(min_value=0, max_value=10_000),
    start=st.floats(min_value=0, max_value=1e6),
    early=st.floats(min_value=1e-3, max_value=1.0),
)
def test_the_cooldown_boundary_for_any_length(cooldown: float, start: float, early: float) -> None:
    r = rig(cooldown_secs=cooldown)
    r.advance(start)
    assert r.tick(zscore=5.0).passed
    if cooldown >= early:
        r.advance_to(start + cooldown - early)  # just before the end
        assert r.tick(zscore=5.0) is COOLING_DOWN
    r.advance_to(start + cooldown)  # exactly the end
    assert r.tick(zscore=5.0).passed


def test_the_timer_and_conditions_due_in_the_cooldown_pass_when_it_ends() -> None:
    r = rig(cooldown_secs=120)
    r.gate.update_from_agent(60, [_cond("eth_price", "gt", 4000)])
    r.metrics["eth_price"] = 3900.0
    assert r.tick(closed=True).passed  # a decision just ran
    r.metrics["eth_price"] = 4100.0
    r.advance(60)
    assert r.tick() is COOLING_DOWN  # timer due and condition holds, both denied
    r.advance(60)
    verdict = r.tick()
    assert verdict.layer is Layer.AGENT_TIMER
    assert verdict.reasons == ("agent_timer", "wake:eth_price gt 4000")
    stats = r.gate.stats()
    assert stats.agent_timer == LayerStats(passed=1, cooldown=1, quiet=1)
    assert stats.wake_condition == LayerStats(passed=1, cooldown=1, quiet=1)


def test_a_cross_during_the_cooldown_fires_after_it_if_still_across() -> None:
    r = rig(cooldown_secs=120)
    r.gate.update_from_agent(3600, [_cond("btc_price", "crosses_above", 100_000)])
    r.metrics["btc_price"] = 99_000.0
    assert r.tick(closed=True).passed  # baseline 99k taken on the close
    r.metrics["btc_price"] = 100_500.0
    r.advance(30)
    assert r.tick() is COOLING_DOWN
    r.advance(90)
    verdict = r.tick()
    assert verdict.reasons == ("wake:btc_price crosses_above 100000",)
    r.advance(120)
    assert r.tick() is QUIET  # the cross was spent


def test_a_cross_undone_within_the_cooldown_does_not_fire() -> None:
    r = rig(cooldown_secs=120)
    r.gate.update_from_agent(3600, [_cond("btc_price", "crosses_above", 100_000)])
    r.metrics["btc_price"] = 99_000.0
    assert r.tick(closed=True).passed
    r.metrics["btc_price"] = 100_500.0
    r.advance(30)
    assert r.tick() is COOLING_DOWN
    r.metrics["btc_price"] = 99_900.0
    r.advance(90)
    assert r.tick() is QUIET


def test_every_reason_that_held_is_recorded_in_layer_order() -> None:
    r = rig()
    r.gate.update_from_agent(
        60, [_cond("sol_price", "gt", 100, "breakout"), _cond("sol_price", "gt", 1e9)]
    )
    r.metrics["sol_price"] = 150.0
    r.advance(60)
    verdict = r.tick("SOL/USDT", zscore=-4.0)
    assert verdict.layer is Layer.AGENT_TIMER
    assert verdict.reasons == (
        "agent_timer",
        "anomaly:SOL/USDT:z=-4.00",
        "wake:sol_price gt 100 (breakout)",
    )
    stats = r.gate.stats()
    assert stats.last_wake_reasons == verdict.reasons
    assert stats.last_pass_at_ms == T0_MS + 60_000


def test_per_layer_counts_over_a_scripted_session() -> None:
    r = rig(cooldown_secs=120)
    r.gate.update_from_agent(3600, [_cond("btc_price", "lt", 90_000)])
    r.metrics["btc_price"] = 95_000.0
    script = [
        (False, 0.1),  # quiet
        (False, None),  # anomaly unavailable
        (False, 2.5),  # anomaly passes
        (False, 2.5),  # anomaly in cooldown
        (True, 0.0),  # close passes in cooldown
    ]
    for closed, z in script:
        r.tick(closed=closed, zscore=z)
    r.metrics["btc_price"] = 85_000.0
    r.tick()  # condition holds in cooldown
    r.advance(120)
    r.tick()  # condition passes
    stats = r.gate.stats()
    assert stats.evaluations == 7 and stats.passes == 3
    assert stats.candle_close == LayerStats(passed=1, quiet=6)
    assert stats.agent_timer == LayerStats(quiet=7)
    assert stats.anomaly == LayerStats(passed=1, cooldown=1, unavailable=1, quiet=4)
    assert stats.wake_condition == LayerStats(passed=1, cooldown=1, quiet=5)
    _layers_add_up(stats)


def test_features_none_and_a_plain_dict_source_work() -> None:
    r = rig()
    r.gate.update_from_agent(3600, [_cond("eth_change_1h_pct", "abs_gt", 3)])
    verdict = r.gate.evaluate(make_tick("ETH/USDT"), None, {"eth_change_1h_pct": -3.5})
    assert verdict.reasons == ("wake:eth_change_1h_pct abs_gt 3",)
    # in the cooldown now, but nothing holds (the metric is gone): a plain denial
    assert r.gate.evaluate(make_tick(), make_features(zscore=None), {}) is QUIET
