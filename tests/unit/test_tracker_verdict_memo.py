"""The tracker takes a ticker's last safety verdict again when nothing it is computed from changed:
always the verdict ``safety_verdict`` gives, field for field."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_tracker_support import BTC, ETH, make_rig

from tracker.config import TrackerConfig
from tracker.positions import TrackedPosition
from tracker.safety import safety_verdict

# few values, so that inputs repeat; an int price equals a float one (the verdict must not care)
_prices = st.sampled_from([100, 100.0, 91.0, 89.99, 108.0, 110.5, 96.8, 0.5])
_highs = st.sampled_from([100.0, 108.0, 110.5, 125.0])


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    checks=st.lists(
        st.tuples(
            st.sampled_from([BTC, ETH]),
            st.sampled_from([100.0, 95.0]),
            _prices,
            _highs,
            st.booleans(),
        ),
        max_size=40,
    ),
    config=st.sampled_from(
        [TrackerConfig(), TrackerConfig(stop_loss_pct=-5.0, trailing_arm_pct=4.0)]
    ),
)
def test_the_verdict_taken_again_is_the_one_computed(
    tmp_path: Path,
    checks: list[tuple[str, float, float, float, bool]],
    config: TrackerConfig,
) -> None:
    tracker = make_rig(tmp_path, config=config).tracker
    for ticker, entry, price, high, armed in checks:
        position = TrackedPosition(
            ticker=ticker,
            entry_price=entry,
            quantity=1.0,
            entry_time_ms=0,
            trailing_high=high,
            armed=armed,
        )
        got = tracker._safety.verdict(ticker, position, price, tracker.config)
        want = safety_verdict(entry, price, high, armed, config)
        assert got == want
        assert got.model_dump_json() == want.model_dump_json()


def test_a_changed_config_is_a_changed_input(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    position = TrackedPosition(
        ticker=BTC, entry_price=100.0, quantity=1.0, entry_time_ms=0, trailing_high=100.0
    )
    assert rig.tracker._safety.verdict(BTC, position, 94.0, rig.tracker.config).exit is None
    rig.tracker.config = TrackerConfig(stop_loss_pct=-5.0)
    assert rig.tracker._safety.verdict(BTC, position, 94.0, rig.tracker.config).exit is not None
