"""The tracker's agent-cycle test works a config's cadence out once: always the plain formula."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_tracker_support import make_rig

from tracker.config import TrackerConfig

CONFIGS = [
    TrackerConfig(),
    TrackerConfig(safety_interval_secs=30.0, agent_interval_secs=90.0),
    TrackerConfig(safety_interval_secs=20.0, agent_interval_secs=20.0),
    TrackerConfig(safety_interval_secs=15.0, agent_interval_secs=600.0),
]


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(CONFIGS) - 1),
            st.booleans(),  # a copy: another object with the same cadence
            st.integers(0, 500),
        ),
        max_size=30,
    )
)
def test_agent_cycle_due_is_the_plain_formula(
    tmp_path: Path, steps: list[tuple[int, bool, int]]
) -> None:
    tracker = make_rig(tmp_path).tracker
    for index, copied, cycle in steps:
        config = CONFIGS[index].model_copy() if copied else CONFIGS[index]
        tracker.config = config
        tracker._cycle = cycle
        plain = cycle > 0 and cycle % config.agent_every_cycles == 0
        assert tracker._agent_cycle_due() is plain
        tracker._cycle = cycle + 1
        assert tracker._agent_cycle_due() is ((cycle + 1) % config.agent_every_cycles == 0)
