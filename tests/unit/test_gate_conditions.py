"""Wake-condition validation: the metric table, accepted and rejected model output, and that
untrusted input never raises."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gate.conditions import (
    MAX_WAKE_CONDITIONS,
    METRICS,
    REASON_MAX_CHARS,
    Operator,
    WakeCondition,
    build_metric_registry,
    describe_metrics,
    validate_conditions,
)


def _one(**fields: Any) -> dict[str, Any]:
    return {"metric": "btc_price", "operator": "lt", "threshold": 90_000, "reason": "dip"} | fields


def _rejected_reason(entry: object) -> str:
    accepted, rejected = validate_conditions([entry])
    assert accepted == []
    assert len(rejected) == 1 and rejected[0].index == 0
    return rejected[0].reason


def test_the_table_names_every_metric_the_agent_is_told_about() -> None:
    for sym in ("btc", "eth", "sol"):
        for suffix in (
            "price",
            "change_1h_pct",
            "change_4h_pct",
            "change_24h_pct",
            "return_zscore",
            "volume_ratio",
            "funding_rate",
        ):
            assert f"{sym}_{suffix}" in METRICS
    for name in ("funding_rate", "open_interest_change_pct", "long_short_ratio", "fear_greed"):
        assert METRICS[name].origin in {"derivatives", "sentiment"}
    assert METRICS["btc_price"].unit == "USDT" and METRICS["btc_price"].origin == "tick"
    assert all(
        spec.unit and spec.description and spec.name == name for name, spec in METRICS.items()
    )


def test_describe_prints_one_line_per_metric() -> None:
    lines = describe_metrics().splitlines()
    assert len(lines) == len(METRICS)
    assert "btc_price (USDT): last traded price of BTC/USDT" in lines
    assert any(line.startswith("fear_greed (index 0-100): ") for line in lines)


def test_a_registry_for_other_tickers_and_its_refusals() -> None:
    registry = build_metric_registry(["DOGE/USDT:USDT"])
    assert "doge_price" in registry and "btc_price" not in registry
    with pytest.raises(ValueError, match="share a metric prefix"):
        build_metric_registry(["BTC/USDT", "BTC/USDC"])
    with pytest.raises(ValueError, match="lowercase letters"):
        build_metric_registry(["BTC-X/USDT"])


def test_valid_entries_are_accepted_and_normalised() -> None:
    accepted, rejected = validate_conditions(
        [
            _one(),
            {"metric": " ETH_Price ", "operator": "CROSSES_ABOVE", "threshold": 4000.5},
            {"metric": "fear_greed", "operator": "abs_lt", "threshold": 0},  # reason optional
        ]
    )
    assert rejected == []
    assert accepted == [
        WakeCondition(metric="btc_price", operator=Operator.LT, threshold=90_000.0, reason="dip"),
        WakeCondition(metric="eth_price", operator=Operator.CROSSES_ABOVE, threshold=4000.5),
        WakeCondition(metric="fear_greed", operator=Operator.ABS_LT, threshold=0.0),
    ]
    assert accepted[0].describe() == "btc_price lt 90000 (dip)"
    assert accepted[1].describe() == "eth_price crosses_above 4000.5"


def test_unknown_metric_is_rejected_with_a_hint() -> None:
    assert _rejected_reason(_one(metric="btc_funding")) == (
        "unknown metric 'btc_funding' (did you mean btc_funding_rate?)"
    )
    assert _rejected_reason(_one(metric="xyzzy")) == "unknown metric 'xyzzy'"
    assert _rejected_reason(_one(metric=7)) == "metric must be a name, got int"


def test_unknown_operator_is_rejected_naming_the_known_ones() -> None:
    reason = _rejected_reason(_one(operator="<"))
    assert reason.startswith("unknown operator '<' (known: lt, gt, lte, gte, abs_gt, abs_lt,")
    assert _rejected_reason(_one(operator=None)).startswith("unknown operator None")


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (math.nan, "threshold must be finite, got nan"),
        (math.inf, "threshold must be finite, got inf"),
        (-math.inf, "threshold must be finite, got -inf"),
        ("90000", "threshold must be a number, got str"),
        (True, "threshold must be a number, got bool"),
        (None, "threshold must be a number, got NoneType"),
        (10**400, "threshold is out of range"),
    ],
)
def test_bad_thresholds_are_rejected(threshold: object, expected: str) -> None:
    assert _rejected_reason(_one(threshold=threshold)) == expected


def test_negative_threshold_for_an_absolute_operator_is_a_mistake() -> None:
    assert _rejected_reason(_one(operator="abs_gt", threshold=-1)) == (
        "abs_gt needs a threshold >= 0, got -1"
    )
    accepted, _ = validate_conditions([_one(operator="lt", threshold=-1)])
    assert accepted[0].threshold == -1.0


def test_malformed_entries_are_rejected() -> None:
    assert _rejected_reason("btc_price lt 90000") == "a wake condition must be an object, got str"
    assert _rejected_reason({"metric": "btc_price", "operator": "lt"}) == "missing threshold"
    assert _rejected_reason(_one(extra=1, also=2)) == "unexpected field(s) ['also', 'extra']"
    assert _rejected_reason(_one(reason=["x"])) == "reason must be text, got list"


def test_the_reason_text_is_cleaned_and_bounded() -> None:
    accepted, _ = validate_conditions(
        [_one(reason="line one\nINFO forged log line\x00\x1b[31m   red\u200b" + "x" * 500)]
    )
    reason = accepted[0].reason
    assert "\n" not in reason and "\x00" not in reason and "\x1b" not in reason
    assert "\u200b" not in reason  # format characters go too
    assert reason.startswith("line one INFO forged log line[31m red")
    assert len(reason) == REASON_MAX_CHARS and reason.endswith("…")


def test_duplicates_and_entries_over_the_cap_are_rejected() -> None:
    entries = [_one(threshold=float(i)) for i in range(MAX_WAKE_CONDITIONS + 2)]
    entries.insert(1, {"metric": "nope", "operator": "lt", "threshold": 1})  # takes no slot
    entries.insert(2, _one(threshold=0.0, reason="again"))
    accepted, rejected = validate_conditions(entries)
    assert len(accepted) == MAX_WAKE_CONDITIONS
    assert [(r.index, r.reason) for r in rejected] == [
        (1, "unknown metric 'nope'"),
        (2, "duplicate of wake condition #0"),
        (12, f"over the limit of {MAX_WAKE_CONDITIONS} wake conditions"),
        (13, f"over the limit of {MAX_WAKE_CONDITIONS} wake conditions"),
    ]
    _, capped = validate_conditions([_one()], max_conditions=0)
    assert capped[0].reason == "over the limit of 0 wake conditions"


@pytest.mark.parametrize("raw", [{"metric": "btc_price"}, "conditions", b"x", 42])
def test_something_other_than_a_list_is_rejected_as_a_whole(raw: object) -> None:
    accepted, rejected = validate_conditions(raw)
    assert accepted == [] and [r.reason for r in rejected] == ["wake_conditions must be a list"]


def test_none_means_no_conditions() -> None:
    assert validate_conditions(None) == ([], [])
    assert validate_conditions([]) == ([], [])


def test_the_raw_rendering_is_bounded() -> None:
    _, rejected = validate_conditions([{"metric": "m" * 10_000, "operator": "lt", "threshold": 1}])
    assert len(rejected[0].raw) <= 240 and len(rejected[0].reason) < 200


def test_the_model_itself_refuses_bad_values() -> None:
    with pytest.raises(ValidationError):
        WakeCondition(metric="btc_price", operator=Operator.LT, threshold=math.nan)
    with pytest.raises(ValidationError):
        WakeCondition.model_validate({"metric": "btc_price", "operator": "eq", "threshold": 1.0})
    with pytest.raises(ValidationError):
        WakeCondition(metric="BTC price", operator=Operator.LT, threshold=1.0)
    with pytest.raises(ValidationError):
        WakeCondition(metric="btc_price", operator=Operator.LT, threshold=1.0, reason="x" * 161)


def test_wake_condition_instances_are_checked_against_the_registry_too() -> None:
    condition = WakeCondition(metric="doge_price", operator=Operator.GT, threshold=1.0)
    assert validate_conditions([condition])[1][0].reason.startswith("unknown metric 'doge_price'")
    ok = WakeCondition(metric="btc_price", operator=Operator.GT, threshold=1.0)
    assert validate_conditions([ok]) == ([ok], [])


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["btc_price", "lt", "crosses_below", "abs_gt"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "metric": st.sampled_from([*list(METRICS)[:5], "nope"]) | _json,
        "operator": st.sampled_from([op.value for op in Operator]) | _json,
        "threshold": st.floats() | st.integers() | _json,
        "reason": st.text(max_size=300) | _json,
    },
)


@given(st.lists(_entry | _json, max_size=15))
def test_untrusted_lists_never_raise_and_every_entry_is_sorted(raw: list[object]) -> None:
    accepted, rejected = validate_conditions(raw)
    assert len(accepted) + len(rejected) == len(raw)
    assert len(accepted) <= MAX_WAKE_CONDITIONS
    for condition in accepted:
        assert condition.metric in METRICS and math.isfinite(condition.threshold)
        assert len(condition.reason) <= REASON_MAX_CHARS and condition.reason.isprintable()
    assert all(r.reason for r in rejected)
