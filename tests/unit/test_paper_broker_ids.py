"""Client order ids: always valid for Binance, deterministic, distinct for distinct orders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from broker.ids import CLIENT_ORDER_ID_PATTERN, client_order_id, is_valid_client_order_id
from broker.port import Action

_actions = st.sampled_from(["BUY", "SELL", "buy", "Sell", Action.BUY, Action.SELL])
_order_keys = st.tuples(
    st.text(max_size=200),  # any decision id, including unicode, spaces, the empty string
    st.text(max_size=40),
    st.sampled_from(["BUY", "SELL"]),
    st.integers(min_value=0, max_value=10**12),
)


@settings(max_examples=examples(500), deadline=None)
@given(
    decision_id=st.text(max_size=500),
    ticker=st.text(max_size=60),
    action=_actions,
    seq=st.integers(min_value=0, max_value=2**63),
)
def test_ids_always_match_the_exchange_rule_and_are_deterministic(
    decision_id: str, ticker: str, action: str, seq: int
) -> None:
    made = client_order_id(decision_id, ticker, action, seq)
    assert CLIENT_ORDER_ID_PATTERN.fullmatch(made), made
    assert is_valid_client_order_id(made)
    assert len(made) <= 36
    assert client_order_id(decision_id, ticker, str(action).upper(), seq) == made


@settings(max_examples=examples(200), deadline=None)
@given(keys=st.lists(_order_keys, min_size=2, max_size=60, unique=True))
def test_distinct_orders_get_distinct_ids(keys: list[tuple[str, str, str, int]]) -> None:
    ids = [client_order_id(*key) for key in keys]
    assert len(set(ids)) == len(ids)


def test_ids_that_differ_only_in_one_part_differ() -> None:
    base = client_order_id("d1740787200000-1", "BTC/USDT", "BUY")
    assert base != client_order_id("d1740787200000-2", "BTC/USDT", "BUY")
    assert base != client_order_id("d1740787200000-1", "ETH/USDT", "BUY")
    assert base != client_order_id("d1740787200000-1", "BTC/USDT", "SELL")
    assert base != client_order_id("d1740787200000-1", "BTC/USDT", "BUY", seq=1)
    # symbols that read the same once cleaned still differ through the digest
    assert client_order_id("d", "BTC/USDT", "BUY") != client_order_id("d", "BTCUSDT", "BUY")


def test_the_derivation_is_stable_across_versions() -> None:
    # a change here would re-place every order a restarted daemon replays: bump the derivation tag
    assert client_order_id("d1", "BTC/USDT", "BUY") == "vgb-BTCUSDT-0181cbc14a693f310708"
    assert client_order_id("d1", "BTC/USDT", Action.BUY) == client_order_id("d1", "BTC/USDT", "buy")
    assert client_order_id("d1", "SOL/USDT", "SELL").startswith("vgs-SOLUSDT-")


def test_a_thousand_ids_one_decision_apart_are_unique() -> None:
    ids = {client_order_id(f"d{n}", "BTC/USDT", "BUY") for n in range(1000)}
    assert len(ids) == 1000


@pytest.mark.parametrize("action", ["HOLD", "", "B"])
def test_unknown_actions_are_refused(action: str) -> None:
    with pytest.raises(ValueError, match="BUY or SELL"):
        client_order_id("d1", "BTC/USDT", action)


def test_negative_seq_is_refused() -> None:
    with pytest.raises(ValueError, match="seq"):
        client_order_id("d1", "BTC/USDT", "BUY", seq=-1)
